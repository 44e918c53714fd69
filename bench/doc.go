// Command bench measures exechost against its baselines, side by side in
// one run, and rewrites BENCHMARKS.md with the figures:
//
//	go run ./bench            # full run (~10 minutes on 2 cores)
//	go run ./bench -quick     # a short run with fewer iterations
//	go run ./bench -only exec,throughput,openclaw -out ''
//	                          # some sections; openclaw (a real OpenClaw
//	                          # gateway, side by side) runs last, in the
//	                          # same invocation, into its own block
//
// Every row is measured next to its baseline in the same run (interleaved
// where both are latencies), and reported as p50/p99 plus the ratio to the
// baseline. Rows whose dependency is absent (Docker, bwrap) say why.
package main
