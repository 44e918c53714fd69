#!/usr/bin/env bash
# provision-kubernetes.sh builds, starts and stops a real single-node
# Kubernetes cluster on this machine for the Kubernetes sandbox backend's
# tests and benchmark (internal/sandbox/kubernetes, bench/).
#
# Usage (as root):
#   scripts/provision-kubernetes.sh build   build the binaries into the cache (idempotent)
#   scripts/provision-kubernetes.sh up      build if needed, then start the cluster (idempotent)
#   scripts/provision-kubernetes.sh down    stop the cluster and undo what the kubelet changed
#   scripts/provision-kubernetes.sh status  exit 0 when the cluster runs and its node is Ready
#   scripts/provision-kubernetes.sh env     print `export KUBECONFIG=…` for a running cluster
#   scripts/provision-kubernetes.sh image REF DIR   import DIR as image REF (no registry)
#
# What runs: etcd, kube-apiserver, kube-controller-manager, kube-scheduler and
# a kubelet (all built with `go build` from their Go modules through the Go
# module proxy), a private containerd with the CRI plugin on (Debian's
# containerd, which comes with docker.io; Docker's own instance has CRI off),
# and the CNI bridge, host-local and loopback plugins (also built from their
# Go module). Images are made here, FROM scratch plus busybox-static, and
# imported into containerd: no registry is involved and pods use
# imagePullPolicy: Never.
#
# The kubelet is v1.34.x on purpose: 1.35 refuses cgroup v1, which these
# machines have, and drops containerd 1.x.
#
# Environment:
#   EXECHOST_K8S_VERSION  Kubernetes version (default v1.34.4)
#   EXECHOST_K8S_CACHE    where built binaries are kept, keyed by version
#                         (default /root/.cache/exechost-k8s)
#   EXECHOST_K8S_DIR      the running cluster's state (default /tmp/exechost-k8s)
#   EXECHOST_K8S_NICE     niceness of the build (default 10)
set -euo pipefail

VERSION=${EXECHOST_K8S_VERSION:-v1.34.4}
ETCD_VERSION=v3.5.21
CNI_VERSION=v1.6.2
CACHE_ROOT=${EXECHOST_K8S_CACHE:-${HOME:-/root}/.cache/exechost-k8s}
CACHE=$CACHE_ROOT/$VERSION
BIN=$CACHE/bin
K8S=${EXECHOST_K8S_DIR:-/tmp/exechost-k8s}
NICE=${EXECHOST_K8S_NICE:-10}

# Ports are off the usual ones so a developer's own cluster is not disturbed.
ETCD_PORT=23790
ETCD_PEER=23800
ETCD_METRICS=23810
API_PORT=16443
NODE=localhost

log() { printf 'provision-kubernetes: %s\n' "$*"; }
die() { printf 'provision-kubernetes: %s\n' "$*" >&2; exit 1; }

KUBE_BINS=(kube-apiserver kubelet kube-scheduler kube-controller-manager kubectl)
CNI_BINS=(bridge host-local loopback)

built() {
	local b
	for b in "${KUBE_BINS[@]}" etcd; do [ -x "$BIN/$b" ] || return 1; done
	for b in "${CNI_BINS[@]}"; do [ -x "$BIN/cni/$b" ] || return 1; done
}

# build_module DIR MODULE-LINES TOOLS-IMPORTS: writes a throwaway build
# module whose tools.go imports the commands to build, and resolves it.
build_module() {
	local dir=$1 gomod=$2 imports=$3
	mkdir -p "$dir"
	printf '%s\n' "$gomod" >"$dir/go.mod"
	{
		echo '//go:build tools'
		echo
		echo 'package tools'
		echo
		echo 'import ('
		local i
		for i in $imports; do echo "	_ \"$i\""; done
		echo ')'
	} >"$dir/tools.go"
	(cd "$dir" && GOFLAGS=-mod=mod go mod tidy)
}

build_kube() {
	local minor=${VERSION#v1.} staging
	minor=${minor%%.*}
	staging=v0.${VERSION#v1.}
	local gomod="module exechost.test/k8sbuild

go 1.24.0

require k8s.io/kubernetes $VERSION
"
	local m
	for m in api apiextensions-apiserver apimachinery apiserver cli-runtime client-go cloud-provider \
		cluster-bootstrap code-generator component-base component-helpers controller-manager cri-api \
		cri-client csi-translation-lib dynamic-resource-allocation endpointslice externaljwt kms \
		kube-aggregator kube-controller-manager kube-proxy kube-scheduler kubectl kubelet metrics \
		mount-utils pod-security-admission sample-apiserver; do
		gomod+="replace k8s.io/$m => k8s.io/$m $staging
"
	done
	build_module "$CACHE/src/kube" "$gomod" \
		"k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kubectl"
	# Without the version stamp the binaries report v0.0.0-master, which
	# kubectl and client-go's discovery cannot parse.
	local ld="-s -w"
	for m in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
		ld+=" -X $m.gitVersion=$VERSION -X $m.gitMajor=1 -X $m.gitMinor=$minor -X $m.gitTreeState=clean"
	done
	local b
	for b in "${KUBE_BINS[@]}"; do
		[ -x "$BIN/$b" ] && continue
		log "building $b $VERSION"
		(cd "$CACHE/src/kube" && CGO_ENABLED=0 nice -n "$NICE" go build -trimpath -tags tools -ldflags "$ld" -o "$BIN/$b.tmp" "k8s.io/kubernetes/cmd/$b")
		mv "$BIN/$b.tmp" "$BIN/$b"
	done
}

build_etcd() {
	[ -x "$BIN/etcd" ] && return 0
	log "building etcd $ETCD_VERSION"
	build_module "$CACHE/src/etcd" "module exechost.test/etcdbuild

go 1.24.0

require go.etcd.io/etcd/server/v3 $ETCD_VERSION
" "go.etcd.io/etcd/server/v3"
	(cd "$CACHE/src/etcd" && CGO_ENABLED=0 nice -n "$NICE" go build -trimpath -tags tools -ldflags "-s -w" -o "$BIN/etcd.tmp" go.etcd.io/etcd/server/v3)
	mv "$BIN/etcd.tmp" "$BIN/etcd"
}

build_cni() {
	local b
	mkdir -p "$BIN/cni"
	build_module "$CACHE/src/cni" "module exechost.test/cnibuild

go 1.24.0

require github.com/containernetworking/plugins $CNI_VERSION
" "github.com/containernetworking/plugins/plugins/main/bridge github.com/containernetworking/plugins/plugins/ipam/host-local github.com/containernetworking/plugins/plugins/main/loopback"
	for b in "${CNI_BINS[@]}"; do
		[ -x "$BIN/cni/$b" ] && continue
		local pkg=github.com/containernetworking/plugins/plugins/main/$b
		[ "$b" = host-local ] && pkg=github.com/containernetworking/plugins/plugins/ipam/host-local
		log "building CNI plugin $b $CNI_VERSION"
		(cd "$CACHE/src/cni" && CGO_ENABLED=0 nice -n "$NICE" go build -trimpath -tags tools -ldflags "-s -w" -o "$BIN/cni/$b.tmp" "$pkg")
		mv "$BIN/cni/$b.tmp" "$BIN/cni/$b"
	done
}

cmd_build() {
	if built; then
		log "binaries for $VERSION are cached in $BIN"
		return 0
	fi
	command -v go >/dev/null || die "go not found (hint: the build needs the Go toolchain and the Go module proxy)"
	mkdir -p "$BIN"
	local start=$SECONDS
	build_etcd
	build_cni
	build_kube
	log "built in $((SECONDS - start))s into $BIN"
}

# --- running the cluster ---------------------------------------------------

KUBELET_PORT=10350
KUBELET_HEALTHZ=10348
SCHED_PORT=10359
KCM_PORT=10357
BRIDGE=exechostk8s0
SUBNET=10.244.77.0/24
# Image names are fixed: pods of the tests and the benchmark name them, and
# imagePullPolicy Never means nothing is fetched.
PAUSE_IMAGE=exechost.test/pause:1
BUSYBOX_IMAGE=exechost.test/busybox:1

CTR() { ctr --address "$K8S/containerd/containerd.sock" -n k8s.io "$@"; }
KUBECTL() { "$BIN/kubectl" --kubeconfig "$K8S/admin.kubeconfig" "$@"; }

# wait_for SECONDS WHAT CMD...: runs CMD until it succeeds, or fails loudly
# with the last lines of the component's log.
wait_for() {
	local secs=$1 what=$2 i=0
	shift 2
	while ! "$@" >/dev/null 2>&1; do
		i=$((i + 1))
		if [ "$i" -gt $((secs * 5)) ]; then
			log "$what did not come up within ${secs}s; last lines of $K8S/logs/$what.log:"
			tail -n 20 "$K8S/logs/$what.log" >&2 || true
			return 1
		fi
		sleep 0.2
	done
}

# daemon NAME CMD...: starts CMD in its own session, logging to
# $K8S/logs/NAME.log, with its pid in $K8S/pids/NAME.
daemon() {
	local name=$1
	shift
	setsid "$@" >>"$K8S/logs/$name.log" 2>&1 </dev/null &
	echo $! >"$K8S/pids/$name"
}

running() { [ -f "$K8S/pids/$1" ] && kill -0 "$(cat "$K8S/pids/$1")" 2>/dev/null; }

mkpki() {
	local P=$K8S/pki
	[ -f "$P/admin.crt" ] && return 0
	mkdir -p "$P"
	(
		cd "$P"
		openssl genrsa -out ca.key 2048 2>/dev/null
		openssl req -x509 -new -key ca.key -subj "/CN=exechost-test-ca" -days 3650 -out ca.crt 2>/dev/null
		printf 'subjectAltName=IP:127.0.0.1,IP:10.0.0.1,DNS:localhost,DNS:kubernetes.default.svc\nextendedKeyUsage=serverAuth\n' >server.ext
		printf 'extendedKeyUsage=clientAuth\n' >client.ext
		cert() { # name subject ext
			openssl genrsa -out "$1.key" 2048 2>/dev/null
			openssl req -new -key "$1.key" -subj "$2" -out "$1.csr" 2>/dev/null
			openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 -extfile "$3" -out "$1.crt" 2>/dev/null
		}
		cert apiserver "/CN=kube-apiserver" server.ext
		cert admin "/O=system:masters/CN=admin" client.ext
		cert kubelet "/O=system:nodes/CN=system:node:$NODE" client.ext
		cert apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" client.ext
		openssl genrsa -out sa.key 2048 2>/dev/null
		openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
	)
}

kubeconfig() { # file cert-name
	cat >"$1" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: exechost-test
  cluster: {server: "https://127.0.0.1:$API_PORT", certificate-authority: "$K8S/pki/ca.crt"}
users:
- name: $2
  user: {client-certificate: "$K8S/pki/$2.crt", client-key: "$K8S/pki/$2.key"}
contexts:
- name: exechost-test
  context: {cluster: exechost-test, user: $2}
current-context: exechost-test
EOF
}

# image_import REF DIR [CMD-JSON]: imports DIR's files as a one-layer
# image (docker-archive format) into the cluster's containerd.
image_import() {
	local ref=$1 dir=$2 cmd=${3:-'["/bin/sh"]'} tmp
	tmp=$(mktemp -d)
	tar --numeric-owner --owner=0 --group=0 -C "$dir" -cf "$tmp/layer.tar" .
	local diff
	diff=$(sha256sum "$tmp/layer.tar" | cut -d' ' -f1)
	printf '{"architecture":"amd64","os":"linux","config":{"Cmd":%s,"Env":["PATH=/bin"]},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]}}' "$cmd" "$diff" >"$tmp/config.json"
	local cfg
	cfg=$(sha256sum "$tmp/config.json" | cut -d' ' -f1)
	mv "$tmp/config.json" "$tmp/$cfg.json"
	printf '[{"Config":"%s.json","RepoTags":["%s"],"Layers":["layer.tar"]}]' "$cfg" "$ref" >"$tmp/manifest.json"
	tar -C "$tmp" -cf "$tmp/image.tar" manifest.json "$cfg.json" layer.tar
	CTR images import --no-unpack=false "$tmp/image.tar" >/dev/null
	rm -rf "$tmp"
}

busybox_root() { # dir: busybox-static and its applet links
	local dir=$1 bb
	bb=$(command -v busybox) || die "busybox not found (hint: apt-get install busybox-static)"
	mkdir -p "$dir/bin" "$dir/tmp"
	cp "$bb" "$dir/bin/busybox"
	local a
	for a in $("$dir/bin/busybox" --list); do [ -e "$dir/bin/$a" ] || ln -s busybox "$dir/bin/$a"; done
}

import_images() {
	local have
	have=$(CTR images ls -q)
	if ! grep -qx "docker.io/$PAUSE_IMAGE\|$PAUSE_IMAGE" <<<"$have" || ! grep -qx "docker.io/$BUSYBOX_IMAGE\|$BUSYBOX_IMAGE" <<<"$have"; then
		local root
		root=$(mktemp -d)
		busybox_root "$root"
		# The pod sandbox ("pause") container only has to stay alive.
		image_import "$PAUSE_IMAGE" "$root" '["/bin/sh","-c","trap \"exit 0\" TERM INT; while :; do sleep 3600 & wait $!; done"]'
		image_import "$BUSYBOX_IMAGE" "$root"
		rm -rf "$root"
	fi
}

configs() {
	mkdir -p "$K8S"/{logs,pids,cni/net.d,cni/ipam,containerd,kubelet/root,kubelet/pki,etcd-data}
	cat >"$K8S/containerd/config.toml" <<EOF
version = 2
root = "$K8S/containerd/root"
state = "$K8S/containerd/state"
[grpc]
  address = "$K8S/containerd/containerd.sock"
[ttrpc]
  address = "$K8S/containerd/containerd.sock.ttrpc"
[debug]
  address = "$K8S/containerd/debug.sock"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  enable_selinux = false
  # Without CAP_SYS_RESOURCE a negative oom_score_adj fails every pod.
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "$BIN/cni"
    conf_dir = "$K8S/cni/net.d"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
EOF
	cat >"$K8S/cni/net.d/10-bridge.conflist" <<EOF
{"cniVersion":"0.4.0","name":"exechost-test","plugins":[
 {"type":"bridge","bridge":"$BRIDGE","isGateway":true,"ipMasq":false,
  "ipam":{"type":"host-local","ranges":[[{"subnet":"$SUBNET"}]],"dataDir":"$K8S/cni/ipam"}},
 {"type":"loopback"}]}
EOF
	cat >"$K8S/kubelet/config.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: 127.0.0.1
port: $KUBELET_PORT
healthzBindAddress: 127.0.0.1
healthzPort: $KUBELET_HEALTHZ
readOnlyPort: 0
authentication:
  x509: {clientCAFile: "$K8S/pki/ca.crt"}
  webhook: {enabled: false}
  anonymous: {enabled: false}
authorization: {mode: AlwaysAllow}
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
containerRuntimeEndpoint: unix://$K8S/containerd/containerd.sock
# The kubelet would otherwise add KUBE-FIREWALL rules dropping non-local
# traffic to 127.0.0.0/8 on a shared machine.
makeIPTablesUtilChains: false
evictionHard: {memory.available: "100Mi", nodefs.available: "1%", imagefs.available: "1%", nodefs.inodesFree: "1%"}
imageGCHighThresholdPercent: 100
serializeImagePulls: false
EOF
	kubeconfig "$K8S/admin.kubeconfig" admin
	kubeconfig "$K8S/kubelet.kubeconfig" kubelet
}

cmd_up() {
	[ "$(id -u)" = 0 ] || die "must run as root (the kubelet and containerd need it)"
	cmd_build
	if running kubelet && KUBECTL get node "$NODE" >/dev/null 2>&1; then
		log "cluster already up (KUBECONFIG=$K8S/admin.kubeconfig)"
		return 0
	fi
	# A half-started cluster is torn down first: a fresh start is seconds.
	[ -d "$K8S" ] && cmd_down
	command -v containerd >/dev/null || die "containerd not found (hint: apt-get install containerd, which docker.io brings)"
	command -v openssl >/dev/null || die "openssl not found (hint: apt-get install openssl)"
	local start=$SECONDS
	mkpki
	configs
	local P=$K8S/pki

	daemon containerd containerd --config "$K8S/containerd/config.toml"
	wait_for 30 containerd CTR version
	import_images

	daemon etcd "$BIN/etcd" --name exechost-test --data-dir "$K8S/etcd-data" \
		--listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
		--listen-peer-urls "http://127.0.0.1:$ETCD_PEER" --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER" \
		--initial-cluster "exechost-test=http://127.0.0.1:$ETCD_PEER" --listen-metrics-urls "http://127.0.0.1:$ETCD_METRICS"
	wait_for 30 etcd curl -fsS "http://127.0.0.1:$ETCD_PORT/health"

	# ServiceAccount admission is off: sandbox pods mount no token, and a
	# pod created right after its namespace would otherwise race the
	# controller that makes the default ServiceAccount.
	daemon kube-apiserver "$BIN/kube-apiserver" \
		--etcd-servers="http://127.0.0.1:$ETCD_PORT" \
		--bind-address=127.0.0.1 --advertise-address=127.0.0.1 --secure-port="$API_PORT" \
		--cert-dir="$K8S/apiserver-certs" \
		--tls-cert-file="$P/apiserver.crt" --tls-private-key-file="$P/apiserver.key" \
		--client-ca-file="$P/ca.crt" \
		--service-account-key-file="$P/sa.pub" --service-account-signing-key-file="$P/sa.key" \
		--service-account-issuer=https://kubernetes.default.svc \
		--service-cluster-ip-range=10.0.0.0/24 \
		--authorization-mode=Node,RBAC \
		--enable-admission-plugins=NodeRestriction --disable-admission-plugins=ServiceAccount \
		--kubelet-client-certificate="$P/apiserver-kubelet-client.crt" --kubelet-client-key="$P/apiserver-kubelet-client.key" \
		--kubelet-preferred-address-types=Hostname
	wait_for 60 kube-apiserver curl -fsS --cacert "$P/ca.crt" --cert "$P/admin.crt" --key "$P/admin.key" "https://127.0.0.1:$API_PORT/readyz"

	daemon kube-controller-manager "$BIN/kube-controller-manager" --kubeconfig="$K8S/admin.kubeconfig" \
		--bind-address=127.0.0.1 --secure-port="$KCM_PORT" \
		--service-account-private-key-file="$P/sa.key" --root-ca-file="$P/ca.crt" \
		--cluster-signing-cert-file="$P/ca.crt" --cluster-signing-key-file="$P/ca.key" --leader-elect=false
	daemon kube-scheduler "$BIN/kube-scheduler" --kubeconfig="$K8S/admin.kubeconfig" \
		--bind-address=127.0.0.1 --secure-port="$SCHED_PORT" --leader-elect=false

	daemon kubelet "$BIN/kubelet" --config="$K8S/kubelet/config.yaml" --kubeconfig="$K8S/kubelet.kubeconfig" \
		--root-dir="$K8S/kubelet/root" --cert-dir="$K8S/kubelet/pki" --hostname-override="$NODE" -v=1
	wait_for 90 kubelet node_ready
	cat >"$K8S/env" <<EOF
export KUBECONFIG=$K8S/admin.kubeconfig
export EXECHOST_K8S_DIR=$K8S
export EXECHOST_K8S_BIN=$BIN
export EXECHOST_K8S_IMAGE=$BUSYBOX_IMAGE
EOF
	log "cluster up in $((SECONDS - start))s: KUBECONFIG=$K8S/admin.kubeconfig (or: source $K8S/env)"
}

node_ready() {
	[ "$(KUBECTL get node "$NODE" -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" = True ]
}

stop() { # name [seconds]
	local name=$1 secs=${2:-20} pid i=0
	[ -f "$K8S/pids/$name" ] || return 0
	pid=$(cat "$K8S/pids/$name")
	if kill -0 "$pid" 2>/dev/null; then
		kill -TERM "$pid" 2>/dev/null || true
		while kill -0 "$pid" 2>/dev/null && [ "$i" -lt $((secs * 5)) ]; do
			sleep 0.2
			i=$((i + 1))
		done
		kill -KILL "$pid" 2>/dev/null || true
	fi
	rm -f "$K8S/pids/$name"
}

cmd_down() {
	[ -d "$K8S" ] || { log "nothing to stop ($K8S does not exist)"; return 0; }
	stop kubelet
	# The pods' containers outlive the kubelet and containerd (each has
	# its shim): kill them through containerd while it still answers.
	if running containerd; then
		local id
		for id in $(CTR tasks ls -q 2>/dev/null); do CTR tasks kill -s SIGKILL "$id" >/dev/null 2>&1 || true; done
		for id in $(CTR tasks ls -q 2>/dev/null); do CTR tasks delete -f "$id" >/dev/null 2>&1 || true; done
		for id in $(CTR containers ls -q 2>/dev/null); do CTR containers delete "$id" >/dev/null 2>&1 || true; done
	fi
	stop kube-scheduler
	stop kube-controller-manager
	# The apiserver before etcd: without etcd it ignores SIGTERM for long.
	stop kube-apiserver 40
	stop etcd
	stop containerd
	teardown
	rm -rf "$K8S"
	log "cluster stopped and cleaned up"
}

# teardown undoes what the kubelet, containerd and CNI changed on the host.
teardown() {
	local m
	# Mounts under the cluster's directory (kubelet volumes, overlay
	# snapshots, network namespaces), deepest first.
	for m in $(awk -v d="$K8S" 'index($2, d) == 1 || $2 ~ "^/run/netns/cni-" {print $2}' /proc/self/mounts | sort -r); do
		umount -l "$m" 2>/dev/null || true
	done
	# Network namespaces CNI made for pods.
	for m in /run/netns/cni-*; do
		[ -e "$m" ] || continue
		umount -l "$m" 2>/dev/null || true
		rm -f "$m"
	done
	ip link delete "$BRIDGE" 2>/dev/null || true
	# iptables chains and rules the kubelet (KUBE-*) and CNI (CNI-*) added.
	if command -v iptables-save >/dev/null; then
		local t
		local rules chains rule chain
		for t in filter nat mangle; do
			rules=$(iptables -t "$t" -S 2>/dev/null | grep -E '^-A .*(KUBE-|CNI-)' | sed 's/^-A/-D/' || true)
			while IFS= read -r rule; do
				[ -n "$rule" ] && { eval "iptables -t $t $rule" 2>/dev/null || true; }
			done <<<"$rules"
			chains=$(iptables -t "$t" -S 2>/dev/null | awk '/^-N (KUBE-|CNI-)/ {print $2}' || true)
			for chain in $chains; do
				iptables -t "$t" -F "$chain" 2>/dev/null || true
				iptables -t "$t" -X "$chain" 2>/dev/null || true
			done
		done
	fi
	# The kubelet's /kubepods cgroups in every v1 hierarchy (and v2).
	local h
	for h in /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/kubepods; do
		[ -d "$h" ] || continue
		find "$h" -depth -type d -exec rmdir {} \; 2>/dev/null || true
	done
}

cmd_env() {
	[ -f "$K8S/env" ] || die "no cluster running (hint: $0 up)"
	cat "$K8S/env"
}

case "${1:-}" in
build) cmd_build ;;
status) running kubelet && node_ready ;;
up) cmd_up ;;
down) cmd_down ;;
env) cmd_env ;;
image)
	# image REF DIR [CMD-JSON]: import DIR as a one-layer image, for the
	# tests' agent image.
	[ $# -ge 3 ] || die "usage: $0 image REF DIR [CMD-JSON]"
	image_import "$2" "$3" "${4:-}"
	;;
*) die "usage: $0 build|status|up|down|env|image REF DIR" ;;
esac
