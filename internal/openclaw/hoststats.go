package openclaw

import (
	"time"

	"github.com/exechost/exechost/internal/bridge"
)

// EventHostStats is the node.event OpenClaw's node host publishes with the
// machine's load, memory and disk (its gateway shows them in node.list as
// hostStats); HostStatsInterval is how often, as OpenClaw's does.
const (
	EventHostStats    = "node.host.stats"
	HostStatsInterval = time.Minute
)

// HostStats is node.host.stats's payload, in OpenClaw's schema
// (NodeHostStatsPayloadSchema): free never exceeds total, and the disk
// fields come as a pair or not at all.
type HostStats struct {
	CPUCount           int         `json:"cpuCount"`
	LoadAverage        *[3]float64 `json:"loadAverage,omitempty"`
	MemoryTotalBytes   uint64      `json:"memoryTotalBytes"`
	MemoryFreeBytes    uint64      `json:"memoryFreeBytes"`
	DiskTotalBytes     *uint64     `json:"diskTotalBytes,omitempty"`
	DiskAvailableBytes *uint64     `json:"diskAvailableBytes,omitempty"`
}

// payload is s as node.event's map, bounded as OpenClaw's schema wants.
func (s HostStats) payload() map[string]any {
	s.CPUCount = max(1, min(4096, s.CPUCount))
	s.MemoryFreeBytes = min(s.MemoryFreeBytes, s.MemoryTotalBytes)
	p := map[string]any{"cpuCount": s.CPUCount, "memoryTotalBytes": s.MemoryTotalBytes, "memoryFreeBytes": s.MemoryFreeBytes}
	// OpenClaw leaves out an all-zero load (a platform without one).
	if l := s.LoadAverage; l != nil && (l[0] != 0 || l[1] != 0 || l[2] != 0) {
		p["loadAverage"] = []float64{min(l[0], 1e5), min(l[1], 1e5), min(l[2], 1e5)}
	}
	if s.DiskTotalBytes != nil && s.DiskAvailableBytes != nil {
		p["diskTotalBytes"] = *s.DiskTotalBytes
		p["diskAvailableBytes"] = min(*s.DiskAvailableBytes, *s.DiskTotalBytes)
	}
	return p
}

// publishHostStats sends node.host.stats on c at once and then on every
// tick until c closes, as OpenClaw's node host does after each hello. A
// platform without a sample sends nothing.
func (n *Node) publishHostStats(c *bridge.Conn) {
	tick := n.opts.HostStatsTick
	if tick == nil {
		t := time.NewTicker(HostStatsInterval)
		defer t.Stop()
		tick = t.C
	}
	for {
		s, err := n.opts.SampleHostStats()
		if err != nil {
			n.log.Debug("no host stats", "err", err)
			return
		}
		n.event(c, EventHostStats, s.payload())
		select {
		case <-c.Done():
			return
		case <-tick:
		}
	}
}
