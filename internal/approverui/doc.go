// Package approverui is what every approver UI shares: the facts a human
// reads about a prompt (Describe, AllowAlwaysLines), the UI interface the
// approver daemon (internal/approver) starts, and the UIs small enough to
// live here: the line mode (Lines, RunLines), auto-decide (Auto,
// AutoDecide) and desktop notifications (NotifyDesktop). The terminal UI
// and the web UI are subpackages (tui, web). A UI reads and answers the
// approver's queue (prompt.Broker) and nothing else: it never imports the
// approval socket or the daemon.
package approverui
