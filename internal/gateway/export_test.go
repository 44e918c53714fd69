package gateway

// SetNodeFrameLimit changes the largest invoke g sends a node (negative:
// no check), for tests that show what the check prevents.
func SetNodeFrameLimit(g *Gateway, n int) { g.nodeFrameLimit = n }

// SetCallerLimits lowers the per-caller bounds (0 keeps a default).
func SetCallerLimits(g *Gateway, conns, pending int, bytes int64) {
	g.callers.maxConns, g.callers.maxPending, g.callers.maxBytes = conns, pending, bytes
}

// SetRevocationCut turns cutting revoked credentials' connections on or
// off (tests' control).
func SetRevocationCut(g *Gateway, on bool) { g.revokeOff.Store(!on) }

// SetRefusalAggregation turns the aggregation of credentials' refusals
// on or off (tests' control).
func SetRefusalAggregation(g *Gateway, on bool) { g.refusals.SetOff(!on) }

// FlushRefusals writes the counts of refusals left out now, as the
// gateway does every RefusalInterval.
func FlushRefusals(g *Gateway) { g.writeRefusalCounts() }

// SetHandshakesPerUser counts loopback handshakes per user (on) or all
// of loopback as one source (off, tests' control).
func SetHandshakesPerUser(g *Gateway, on bool) { g.handshakes.sharedLoopback.Store(!on) }

// HandshakesFrom is how many handshakes src holds now.
func HandshakesFrom(g *Gateway, src string) int {
	g.handshakes.mu.Lock()
	defer g.handshakes.mu.Unlock()
	return g.handshakes.bySrc[src]
}
