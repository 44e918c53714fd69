// Package faults holds the fault suite: real gateway, node and approver
// processes on loopback (and in network namespaces) killed, cut off and
// restarted mid-run, with the outcomes every caller and the audit log
// must show. It has no non-test code; `go test ./internal/faults/` runs
// it, bounded in time, as part of the normal test run.
package faults
