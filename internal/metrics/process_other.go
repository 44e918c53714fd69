//go:build !linux

package metrics

// processFamilies has no process_* families outside Linux: they come from
// /proc.
func processFamilies() []family { return nil }
