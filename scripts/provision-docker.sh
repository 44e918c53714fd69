#!/bin/sh
# provision-docker.sh starts a Docker daemon in the background when none
# answers, so the sandbox tests can run against a real Engine API. It is
# idempotent: when `docker`'s socket already answers /_ping it does nothing.
#
# Usage: scripts/provision-docker.sh        (as root)
# Environment:
#   EXECHOST_DOCKERD_LOG   daemon log file (default /tmp/exechost-dockerd.log)
#   EXECHOST_DOCKERD_WAIT  seconds to wait for the socket (default 60)
#
# The daemon runs with --iptables=false and --ip6tables=false: the sandbox
# runs containers with network "none", and test machines often lack the
# netfilter modules, which would stop dockerd from starting at all.
set -eu

sock=/var/run/docker.sock
log=${EXECHOST_DOCKERD_LOG:-/tmp/exechost-dockerd.log}
wait=${EXECHOST_DOCKERD_WAIT:-60}

ping() {
	# curl is not guaranteed; busybox/wget may not speak unix sockets, so
	# ask the daemon through the docker CLI when present, else test the
	# socket with a raw HTTP request.
	if command -v docker >/dev/null 2>&1; then
		docker version --format '{{.Server.Version}}' >/dev/null 2>&1
	elif command -v curl >/dev/null 2>&1; then
		curl -fsS --unix-socket "$sock" http://d/_ping >/dev/null 2>&1
	else
		[ -S "$sock" ]
	fi
}

if ping; then
	echo "provision-docker: dockerd already answers on $sock"
	exit 0
fi

if ! command -v dockerd >/dev/null 2>&1; then
	echo "provision-docker: dockerd not installed (hint: apt-get install docker.io)" >&2
	exit 1
fi
if [ "$(id -u)" != 0 ]; then
	echo "provision-docker: must run as root to start dockerd" >&2
	exit 1
fi

# A stale pid file from a killed daemon stops a new one from starting.
if [ -f /var/run/docker.pid ] && ! kill -0 "$(cat /var/run/docker.pid)" 2>/dev/null; then
	rm -f /var/run/docker.pid
fi

echo "provision-docker: starting dockerd (log: $log)"
nohup dockerd --iptables=false --ip6tables=false >>"$log" 2>&1 </dev/null &

i=0
while [ "$i" -lt "$wait" ]; do
	if ping; then
		echo "provision-docker: dockerd is up"
		exit 0
	fi
	i=$((i + 1))
	sleep 1
done
echo "provision-docker: dockerd did not answer within ${wait}s; last log lines:" >&2
tail -n 20 "$log" >&2 || true
exit 1
