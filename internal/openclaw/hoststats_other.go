//go:build !linux

package openclaw

import "errors"

// errNoHostStats is SampleHostStats's answer where it cannot sample.
var errNoHostStats = errors.New("host stats are not sampled on this platform")

// SampleHostStats is not implemented here: the node publishes no
// node.host.stats (OpenClaw shows no host load for it).
func SampleHostStats() (HostStats, error) { return HostStats{}, errNoHostStats }
