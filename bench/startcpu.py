#!/usr/bin/env python3
# startcpu.py BIN... : start each binary's entry points N times ($N, default 60),
# interleaved with the order rotating, and print the p50 CPU (user+sys), wall
# and max RSS of each from wait4 (BENCHMARKS.md, "Kubernetes driver in the
# default build").
import os, sys, time, statistics
bins = sys.argv[1:]
entries = [["version"], ["--exechost-confine=v1"], ["--exechost-interp=v1"], ["--exechost-jail=v1"]]
N = int(os.environ.get("N", "60"))
def run(argv):
    t0 = time.monotonic()
    pid = os.fork()
    if pid == 0:
        fd = os.open(os.devnull, os.O_WRONLY); os.dup2(fd, 1); os.dup2(fd, 2)
        os.execv(argv[0], argv)
    _, status, ru = os.wait4(pid, 0)
    return time.monotonic() - t0, ru.ru_utime + ru.ru_stime, ru.ru_maxrss
for e in entries:
    res = {b: ([], [], []) for b in bins}
    for i in range(N + 3):
        order = bins[i % len(bins):] + bins[:i % len(bins)]
        for b in order:
            w, c, m = run([b] + e)
            if i >= 3:
                res[b][0].append(w); res[b][1].append(c); res[b][2].append(m)
    print(e[0], " | ".join("%s: cpu %.1f ms wall %.1f ms rss %.1f MB" % (os.path.basename(b), statistics.median(r[1])*1000, statistics.median(r[0])*1000, statistics.median(r[2])/1024) for b, r in res.items()), flush=True)
