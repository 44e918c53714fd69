package metrics

// MaxLabelValue bounds a label value: labels must come from closed sets
// (action, event and reason codes, host kinds), and a value longer than
// this is a bug upstream that must not grow the metric's cardinality.
const MaxLabelValue = 32

// OtherLabel replaces a label value that is not a short, plain token.
const OtherLabel = "other"

// ObserveDecision counts one audited gateway decision. Every value must
// come from a closed set of constants (audit.Action*, audit.Event*,
// audit.Reason*, policy hosts); anything that does not look like one is
// counted as "other" rather than becoming a new series.
func (m *Metrics) ObserveDecision(action, event, reason, host string) {
	if m == nil {
		return
	}
	m.decisions.inc(bounded(action), bounded(event), bounded(reason), bounded(host))
}

// bounded returns v when it is a short token of [a-z0-9.-], else
// OtherLabel.
func bounded(v string) string {
	if len(v) > MaxLabelValue {
		return OtherLabel
	}
	for _, c := range v {
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '.' || c == '-') {
			return OtherLabel
		}
	}
	return v
}

// DecisionsCounted sums the decisions counter over the series with this
// action and, unless it is empty, this reason code (over every event and
// host): what a scrape would add up, for tests and diagnostics.
func (m *Metrics) DecisionsCounted(action, reason string) uint64 {
	if m == nil {
		return 0
	}
	var n uint64
	m.decisions.mu.Lock()
	defer m.decisions.mu.Unlock()
	for _, s := range m.decisions.series {
		if s.values[0] == action && (reason == "" || s.values[2] == reason) {
			n += s.n
		}
	}
	return n
}
