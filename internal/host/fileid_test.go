package host

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/exechost/exechost/internal/approvals"
	"github.com/exechost/exechost/internal/shellcmd"
)

// changedLinear is the reference for changedSinceRecorded: every entry
// of the resolved allowlist, in order, held against every matched
// segment.
func (e *Engine) changedLinear(p *Prepared) []string {
	var out []string
	segs := p.Analysis.Segments
	for i, pat := range p.Matched {
		if pat == "" || i >= len(segs) || segs[i].ResolvedPath == "" {
			continue
		}
		for _, re := range p.Resolved.Allowlist {
			if re.Entry.Pattern != pat || re.Entry.SHA256 == "" {
				continue
			}
			if sum := e.digests.sha256Of(segs[i].ResolvedPath); sum != re.Entry.SHA256 && !slices.Contains(out, segs[i].ResolvedPath) {
				out = append(out, segs[i].ResolvedPath)
			}
		}
	}
	return out
}

// TestRecordedDigestIndex: the index of recorded digests by pattern
// (recordedDigests) reports exactly what a scan of every entry does, on
// random allowlists — patterns listed more than once, with and without
// digests, right and wrong ones, for several agents — and random
// commands over them.
func TestRecordedDigestIndex(t *testing.T) {
	dir := t.TempDir()
	const files = 4
	paths, sums := make([]string, files), make([]string, files)
	for i := range files {
		paths[i] = filepath.Join(dir, fmt.Sprintf("tool%d", i))
		body := fmt.Sprintf("#!/bin/sh\necho %d\n", i)
		if err := os.WriteFile(paths[i], []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256([]byte(body))
		sums[i] = hex.EncodeToString(sum[:])
	}
	e := NewEngine(dir, "gateway", "gw")
	r := rand.New(rand.NewPCG(3, 4))
	for round := range 2000 {
		var res approvals.Resolved
		for range r.IntN(8) {
			en := approvals.Entry{Pattern: paths[r.IntN(files)]}
			if r.IntN(3) == 0 {
				en.Pattern = filepath.Join(dir, "*")
			}
			switch r.IntN(3) {
			case 0:
				en.SHA256 = sums[r.IntN(files)]
			case 1:
				en.SHA256 = "0000"
			}
			res.Allowlist = append(res.Allowlist, approvals.ResolvedEntry{Agent: []string{"*", "main"}[r.IntN(2)], Entry: en})
		}
		p := &Prepared{Resolved: res}
		for range r.IntN(6) {
			seg := shellcmd.Segment{}
			pat := ""
			if r.IntN(4) > 0 {
				seg.ResolvedPath = paths[r.IntN(files)]
			}
			if len(res.Allowlist) > 0 && r.IntN(4) > 0 {
				pat = res.Allowlist[r.IntN(len(res.Allowlist))].Entry.Pattern
			}
			p.Analysis.Segments = append(p.Analysis.Segments, seg)
			p.Matched = append(p.Matched, pat)
		}
		if r.IntN(5) == 0 && len(p.Matched) > 0 { // fewer segments than matches
			p.Analysis.Segments = p.Analysis.Segments[:r.IntN(len(p.Matched))]
		}
		got, want := e.changedSinceRecorded(p, recordedDigests(res)), e.changedLinear(p)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("round %d: indexed (-scan +index):\n%s\nallowlist %+v\nmatched %q", round, diff, res.Allowlist, p.Matched)
		}
	}
}
