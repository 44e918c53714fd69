package shellcmd_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/exechost/exechost/internal/policy"
	"github.com/exechost/exechost/internal/shellcmd"
)

// agentAllowlist is the corpus's 15-entry allowlist: the tools a coding
// agent runs all day (issue 45's list without xargs, which runs a command
// chosen at run time).
var agentAllowlist = []string{"git", "go", "make", "grep", "rg", "ls", "cat", "head", "tail", "wc", "find", "sed", "sort", "npm", "python3"}

// agentCorpusFloor is the share (in per mille) of the corpus allowed
// without a prompt when it was recorded in BENCHMARKS.md; the test fails
// if the analysis ever allows less. Raise it when the figure rises.
// agentCorpusContainedFloor is the same under the contained rules (the
// jail holds, writable roots: the working directory), and
// agentCorpusTmpFloor with /tmp writable too (confine.writable ["/tmp"],
// or a jailed run's private /tmp).
const (
	agentCorpusFloor          = 863
	agentCorpusContainedFloor = 886
	agentCorpusTmpFloor       = 901
)

// TestAgentCorpusShare reports the share of testdata/agent_corpus.json
// (commands coding agents really issue: builds, tests, git, search,
// redirections, loops) that the analysis allows without a prompt under the
// 15-entry allowlist, on a PATH of stand-ins for those tools only. Run
// with -v to see every miss and why:
//
//	go test -run TestAgentCorpusShare -v ./internal/shellcmd
func TestAgentCorpusShare(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("testdata", "agent_corpus.json"))
	if err != nil {
		t.Fatal(err)
	}
	var corpus []string
	if err := json.Unmarshal(raw, &corpus); err != nil {
		t.Fatal(err)
	}
	if len(corpus) < 300 {
		t.Fatalf("corpus has %d commands, want at least 300", len(corpus))
	}
	root := t.TempDir()
	bin, work := filepath.Join(root, "bin"), filepath.Join(root, "work")
	for _, d := range []string{bin, work} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// The directories the corpus changes into, as in a real checkout.
	for _, d := range []string{"internal/policy", "web", "docs"} {
		if err := os.MkdirAll(filepath.Join(work, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	var patterns []string
	for _, n := range agentAllowlist {
		p := filepath.Join(bin, n)
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		patterns = append(patterns, p)
	}
	list := policy.CompileAllowlist(patterns, work)
	strict := shellcmd.Env{Cwd: work, PATH: bin, Home: work}
	contained := strict
	contained.Contained = &shellcmd.Contained{JailHolds: true, WritableRoots: []string{work}}
	t.Run("strict", func(t *testing.T) { corpusShare(t, corpus, list, strict, agentCorpusFloor) })
	t.Run("contained", func(t *testing.T) { corpusShare(t, corpus, list, contained, agentCorpusContainedFloor) })
	withTmp := strict
	withTmp.Contained = &shellcmd.Contained{JailHolds: true, WritableRoots: []string{work, "/tmp"}}
	t.Run("contained_tmp", func(t *testing.T) { corpusShare(t, corpus, list, withTmp, agentCorpusTmpFloor) })
}

// corpusShare measures one rule set's share of the corpus against floor.
func corpusShare(t *testing.T, corpus []string, list *policy.Allowlist, env shellcmd.Env, floor int) {
	allowed := 0
	why := map[string]int{}
	for _, c := range corpus {
		a := shellcmd.Analyze(c, env)
		reason := ""
		switch {
		case !a.OK:
			reason = "analysis: " + failureWhat(a)
		default:
			if _, ok := list.MatchAll(a.Paths()); !ok {
				reason = "allowlist miss"
			}
			for _, n := range a.Env {
				if reason == "" && !policy.EnvPermitted(n, nil) {
					reason = "env " + n
				}
			}
		}
		if reason == "" {
			allowed++
			continue
		}
		why[reason]++
		t.Logf("miss: %q: %s", c, reason)
	}
	share := allowed * 1000 / len(corpus)
	var reasons []string
	for r, n := range why {
		reasons = append(reasons, fmt.Sprintf("%s: %d", r, n))
	}
	sort.Strings(reasons)
	t.Logf("agent corpus: %d of %d allowed without a prompt (%d.%d%%); misses by cause: %s",
		allowed, len(corpus), share/10, share%10, strings.Join(reasons, ", "))
	if share < floor {
		t.Errorf("share %d‰ fell below the recorded floor %d‰", share, floor)
	}
}

// failureWhat is the construct a failed analysis names, without the
// position, so misses group by cause.
func failureWhat(a shellcmd.Analysis) string {
	if a.Failure == nil {
		return a.Error
	}
	w := a.Failure.What
	if i := strings.IndexAny(w, "\"'"); i > 0 {
		w = strings.TrimSpace(w[:i])
	}
	return w
}
