package receipt

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"time"

	"github.com/exechost/exechost/internal/nodekey"
)

// A bundle is what `exechost audit export` writes and `audit verify`
// reads: JSON lines, first a Header, then receipt lines exactly as the
// host wrote them, with Elided lines where the export's filter left
// receipts out. Concatenated bundles (a node's and its gateway's) are a
// bundle too.

// KindBundle and KindElided are the bundle's own (unsigned) lines.
const (
	KindBundle = "bundle"
	KindElided = "elided"
)

// Key is a public key a bundle names (informational: trust comes from the
// verifier's --key / --trust-gateway, never from the bundle).
type Key struct {
	Host     string `json:"host"`
	Key      string `json:"key"`
	DeviceID string `json:"deviceId"`
}

// Header is a bundle's first line.
type Header struct {
	Kind     string `json:"kind"`
	V        int    `json:"v"`
	Exported string `json:"exported"`
	Keys     []Key  `json:"keys"`
	Since    string `json:"since,omitempty"`
	Agent    string `json:"agent,omitempty"`
}

// Elided stands for receipts of one chain an export's filter left out:
// the chain continues through LastDigest, which the next receipt of the
// chain names in prev. It is not signed; the verifier reports every
// elision so a reader knows what the bundle does not show.
type Elided struct {
	Kind       string `json:"kind"`
	HostKey    string `json:"hostKey"`
	FromSeq    uint64 `json:"fromSeq"`
	ToSeq      uint64 `json:"toSeq"`
	LastDigest string `json:"lastDigest"`
}

// Filter selects receipts for an export. A rotation record is always
// exported.
type Filter struct {
	Since time.Time
	Agent string
}

func (f Filter) keep(r Receipt) bool {
	if r.Kind == KindRotated {
		return true
	}
	if !f.Since.IsZero() {
		t, err := time.Parse(time.RFC3339Nano, r.Time)
		if err == nil && t.Before(f.Since) {
			return false
		}
	}
	return f.Agent == "" || r.AgentID == f.Agent
}

// Export writes a bundle of dir's receipts (every file, oldest first)
// selected by f. Lines that do not parse are exported as they are, for the
// verifier to name.
func Export(w io.Writer, dir string, f Filter, now time.Time) error {
	var lines [][]byte
	for _, p := range Files(dir) {
		file, err := os.Open(p)
		if err != nil {
			return fmt.Errorf("export receipts: %w", err)
		}
		err = eachLine(file, func(ln []byte) error {
			lines = append(lines, bytes.Clone(ln))
			return nil
		})
		file.Close()
		if err != nil {
			return err
		}
	}
	h := Header{Kind: KindBundle, V: Version, Exported: Stamp(now), Keys: []Key{}, Agent: f.Agent}
	if !f.Since.IsZero() {
		h.Since = Stamp(f.Since)
	}
	seen := map[string]bool{}
	addKey := func(host, key string) {
		if key == "" || seen[key] {
			return
		}
		seen[key] = true
		id := ""
		if pub, err := nodekey.ParsePublicKey(key); err == nil {
			id = nodekey.DeviceID(pub)
		}
		h.Keys = append(h.Keys, Key{Host: host, Key: key, DeviceID: id})
	}
	for _, ln := range lines {
		if r, err := Parse(ln); err == nil {
			addKey(r.Host, r.HostKey)
			if r.Peer != nil {
				addKey(r.Peer.NodeID, r.Peer.Key)
			}
		}
	}
	var out bytes.Buffer
	writeJSON(&out, h)
	pending := map[string]*Elided{}
	var order []string
	flush := func(key string) {
		if e := pending[key]; e != nil {
			writeJSON(&out, e)
			delete(pending, key)
		}
	}
	for _, ln := range lines {
		r, err := Parse(ln)
		if err == nil && !f.keep(r) {
			e := pending[r.HostKey]
			if e == nil {
				e = &Elided{Kind: KindElided, HostKey: r.HostKey, FromSeq: r.Seq}
				pending[r.HostKey] = e
				order = append(order, r.HostKey)
			}
			e.ToSeq, e.LastDigest = r.Seq, Digest(ln)
			continue
		}
		if err == nil {
			flush(r.HostKey)
		}
		out.Write(ln)
		out.WriteByte('\n')
	}
	for _, k := range order {
		flush(k)
	}
	_, err := w.Write(out.Bytes())
	if err != nil {
		return fmt.Errorf("write bundle: %w", err)
	}
	return nil
}

func writeJSON(b *bytes.Buffer, v any) {
	enc := json.NewEncoder(b)
	_ = enc.Encode(v) // plain structs of strings and numbers
}

// Trust is what a verifier trusts: host keys given on its command line
// and, optionally, a gateway key whose countersignatures vouch for the
// node keys they name.
type Trust struct {
	Keys    []string
	Gateway string
}

// Finding is one problem, naming the receipt.
type Finding struct {
	Line    int    `json:"line"`
	Receipt string `json:"receipt"`
	Problem string `json:"problem"`
}

func (f Finding) String() string {
	return fmt.Sprintf("line %d: %s: %s", f.Line, f.Receipt, f.Problem)
}

// Chain summarises one host's receipts in the bundle.
type Chain struct {
	Host     string `json:"host"`
	HostKey  string `json:"hostKey"`
	Receipts int    `json:"receipts"`
	FirstSeq uint64 `json:"firstSeq"`
	LastSeq  uint64 `json:"lastSeq"`
}

// Report is a verification's outcome: it passes when Findings is empty.
type Report struct {
	Chains   []Chain   `json:"chains"`
	Findings []Finding `json:"findings"`
	// Notes say what the bundle does not show without being wrong:
	// receipts removed by rotation, left out by the export's filter.
	Notes []string `json:"notes"`
}

// OK reports whether nothing was found.
func (r *Report) OK() bool { return len(r.Findings) == 0 }

type entry struct {
	line    int
	raw     []byte
	r       Receipt
	elided  *Elided
	sigOK   bool
	trusted bool
}

func name(r Receipt) string {
	s := fmt.Sprintf("receipt %s#%d", r.Host, r.Seq)
	if r.RunID != "" {
		s += " (run " + r.RunID + ")"
	}
	if r.Kind != KindRun {
		s += " [" + r.Kind + "]"
	}
	return s
}

// Verify checks a bundle read from in against trust, needing nothing else:
// each receipt's canonical form and signature, that its key is trusted,
// each host's chain (gaps, reorders, replays, breaks, with rotation and
// export elisions accounted for), and, with a gateway key, that the
// gateway's countersignatures and the nodes' receipts tell the same
// story. An error is only for input that cannot be read at all.
func Verify(in io.Reader, trust Trust) (*Report, error) {
	rep := &Report{Chains: []Chain{}, Findings: []Finding{}, Notes: []string{}}
	var entries []*entry
	n := 0
	err := eachLine(in, func(ln []byte) error {
		n++
		var k struct {
			Kind string `json:"kind"`
		}
		if json.Unmarshal(ln, &k) != nil {
			rep.Findings = append(rep.Findings, Finding{Line: n, Receipt: "line", Problem: "not JSON"})
			return nil
		}
		switch k.Kind {
		case KindBundle:
			return nil
		case KindElided:
			var e Elided
			dec := json.NewDecoder(bytes.NewReader(ln))
			dec.DisallowUnknownFields()
			if dec.Decode(&e) != nil || e.FromSeq == 0 || e.ToSeq < e.FromSeq {
				rep.Findings = append(rep.Findings, Finding{Line: n, Receipt: "elision", Problem: "malformed elision line"})
				return nil
			}
			entries = append(entries, &entry{line: n, elided: &e})
			return nil
		}
		r, err := Parse(ln)
		if err != nil {
			rep.Findings = append(rep.Findings, Finding{Line: n, Receipt: "line", Problem: "altered or corrupt receipt: " + err.Error()})
			return nil
		}
		entries = append(entries, &entry{line: n, raw: bytes.Clone(ln), r: r, sigOK: CheckSignature(r)})
		return nil
	})
	if err != nil {
		return nil, err
	}
	trusted := map[string]bool{}
	for _, k := range trust.Keys {
		trusted[k] = true
	}
	if trust.Gateway != "" {
		trusted[trust.Gateway] = true
		// The gateway's valid countersignatures vouch for the node keys
		// they name (the key each node proved on connect).
		for _, e := range entries {
			if e.elided == nil && e.sigOK && e.r.HostKey == trust.Gateway && e.r.Kind == KindCountersign && e.r.Peer != nil {
				trusted[e.r.Peer.Key] = true
			}
		}
	}
	for _, e := range entries {
		if e.elided != nil {
			continue
		}
		switch {
		case !e.sigOK:
			rep.Findings = append(rep.Findings, Finding{Line: e.line, Receipt: name(e.r), Problem: "forged or altered: the signature does not verify with the key it names"})
		case !trusted[e.r.HostKey]:
			rep.Findings = append(rep.Findings, Finding{Line: e.line, Receipt: name(e.r), Problem: "signed by key " + short(e.r.HostKey) + ", which is not trusted: a receipt replayed from another host, or a host you did not name (--key / --trust-gateway)"})
		default:
			e.trusted = true
		}
	}
	checkChains(entries, rep)
	if trust.Gateway != "" {
		crossCheck(entries, trust.Gateway, rep)
	}
	slices.SortStableFunc(rep.Findings, func(a, b Finding) int { return a.Line - b.Line })
	return rep, nil
}

func short(key string) string {
	if pub, err := nodekey.ParsePublicKey(key); err == nil {
		return nodekey.Fingerprint(pub)
	}
	return fmt.Sprintf("%q", key)
}

// checkChains walks each host's entries in bundle order.
func checkChains(entries []*entry, rep *Report) {
	type walk struct {
		chain   *Chain
		started bool
		last    uint64
		digest  string // "" when unknown (after a receipt that failed)
		rotated map[uint64]Removed
	}
	chains := map[string]*walk{}
	var order []string
	get := func(key string) *walk {
		w := chains[key]
		if w == nil {
			w = &walk{chain: &Chain{HostKey: key}, rotated: map[uint64]Removed{}}
			chains[key] = w
			order = append(order, key)
		}
		return w
	}
	// Rotation records come after what they removed; collect them first.
	for _, e := range entries {
		if e.elided == nil && e.trusted && e.r.Kind == KindRotated && e.r.Removed != nil {
			get(e.r.HostKey).rotated[e.r.Removed.ToSeq] = *e.r.Removed
		}
	}
	for _, e := range entries {
		if e.elided != nil {
			el := e.elided
			w := get(el.HostKey)
			if w.started && el.FromSeq != w.last+1 {
				rep.Findings = append(rep.Findings, Finding{Line: e.line, Receipt: fmt.Sprintf("elision of %s#%d-%d", short(el.HostKey), el.FromSeq, el.ToSeq), Problem: fmt.Sprintf("does not follow seq %d", w.last)})
			}
			rep.Notes = append(rep.Notes, fmt.Sprintf("line %d: receipts %d-%d of %s are not in the bundle (left out by the export's filter)", e.line, el.FromSeq, el.ToSeq, short(el.HostKey)))
			w.started, w.last, w.digest = true, el.ToSeq, el.LastDigest
			continue
		}
		if !e.trusted && e.sigOK {
			continue // another host's receipt: already named; it is not this chain's
		}
		r := e.r
		w := get(r.HostKey)
		w.chain.Host = r.Host
		w.chain.Receipts++
		if w.chain.FirstSeq == 0 {
			w.chain.FirstSeq = r.Seq
		}
		if r.Seq > w.chain.LastSeq {
			w.chain.LastSeq = r.Seq
		}
		d := Digest(e.raw)
		if !e.sigOK {
			d = "" // its digest is not what the host wrote
		}
		switch {
		case !w.started:
			rm, rotated := w.rotated[r.Seq-1]
			switch {
			case r.Seq == 1 && r.Prev == "":
			case rotated && rm.LastDigest == r.Prev:
				rep.Notes = append(rep.Notes, fmt.Sprintf("receipts %d-%d of %s were removed by rotation (%s)", rm.FromSeq, rm.ToSeq, r.Host, rm.File))
			default:
				rep.Findings = append(rep.Findings, Finding{Line: e.line, Receipt: name(r), Problem: fmt.Sprintf("gap: receipts 1-%d of this host are missing and no rotation record says they were removed", r.Seq-1)})
			}
		case r.Seq <= w.last:
			rep.Findings = append(rep.Findings, Finding{Line: e.line, Receipt: name(r), Problem: fmt.Sprintf("out of order or replayed: seq %d after seq %d", r.Seq, w.last)})
			continue // the chain goes on from the later receipt
		case r.Seq > w.last+1:
			rep.Findings = append(rep.Findings, Finding{Line: e.line, Receipt: name(r), Problem: fmt.Sprintf("gap: receipts %d-%d of this host are missing", w.last+1, r.Seq-1)})
		case w.digest != "" && e.sigOK && r.Prev != w.digest:
			rep.Findings = append(rep.Findings, Finding{Line: e.line, Receipt: name(r), Problem: fmt.Sprintf("chain broken: prev does not name receipt #%d as the bundle has it (a receipt was altered, replaced or inserted)", w.last)})
		}
		w.started, w.last, w.digest = true, r.Seq, d
	}
	for _, k := range order {
		if c := chains[k].chain; c.Receipts > 0 {
			rep.Chains = append(rep.Chains, *c)
		}
	}
}

// crossCheck compares the gateway's countersignatures with the nodes'
// receipts in the bundle.
func crossCheck(entries []*entry, gw string, rep *Report) {
	type key struct{ node, run string }
	counter := map[key]*entry{}
	nodeChains := map[string]bool{}
	elidedChains := map[string]bool{}
	runs := map[key]*entry{}
	for _, e := range entries {
		if e.elided != nil {
			elidedChains[e.elided.HostKey] = true
			continue
		}
		if !e.trusted {
			continue
		}
		switch {
		case e.r.HostKey == gw && e.r.Kind == KindCountersign && e.r.Peer != nil:
			counter[key{e.r.Peer.Key, e.r.RunID}] = e
		case e.r.HostKey != gw:
			nodeChains[e.r.HostKey] = true
			if e.r.Kind == KindRun {
				runs[key{e.r.HostKey, e.r.RunID}] = e
			}
		}
	}
	for k, e := range runs {
		c := counter[k]
		if c == nil {
			rep.Findings = append(rep.Findings, Finding{Line: e.line, Receipt: name(e.r), Problem: "the gateway never saw this run: no countersignature by the trusted gateway names it"})
			continue
		}
		for _, d := range disagree(c.r, e.r) {
			rep.Findings = append(rep.Findings, Finding{Line: e.line, Receipt: name(e.r), Problem: fmt.Sprintf("gateway and node disagree on %s (gateway's countersignature on line %d)", d, c.line)})
		}
	}
	for k, c := range counter {
		if nodeChains[k.node] && !elidedChains[k.node] && runs[k] == nil {
			rep.Findings = append(rep.Findings, Finding{Line: c.line, Receipt: name(c.r), Problem: "the node's chain in this bundle has no receipt for a run the gateway forwarded to it"})
		}
	}
}

// disagree lists the fields where the gateway's view c and the node's
// receipt r differ. A countersignature of a run the node refused carries
// no output.
func disagree(c, r Receipt) []string {
	var out []string
	if c.CommandSHA256 != r.CommandSHA256 {
		out = append(out, "the command (commandSha256)")
	}
	if c.AgentID != r.AgentID {
		out = append(out, "the agent")
	}
	if (c.ExitCode == nil) != (r.ExitCode == nil) || (c.ExitCode != nil && *c.ExitCode != *r.ExitCode) {
		out = append(out, "the exit code")
	}
	if c.Output != nil && r.Output != nil && (c.Output.StdoutSHA256 != r.Output.StdoutSHA256 || c.Output.StderrSHA256 != r.Output.StderrSHA256) {
		out = append(out, "the output (its digests)")
	}
	return out
}
