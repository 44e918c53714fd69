package approvals_test

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/exechost/exechost/internal/approvals"
)

// A typo falls back to the next level, and Resolve says where every value
// came from.
func ExampleFile_Resolve() {
	f, err := approvals.Parse("exec-approvals.json", []byte(`{
  "version": 1,
  "defaults": {"security": "deny", "ask": "on-miss", "askFallback": "deny"},
  "agents": {
    "*":   {"security": "allowlist", "allowlist": [{"pattern": "/usr/bin/git"}]},
    "dev": {"ask": "sometimes", "allowlist": [{"pattern": "rg"}]}
  }
}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	r := f.ResolvePolicy("dev")
	fmt.Println(r.Local.Security, r.Sources["security"])
	fmt.Println(r.Local.Ask, r.Sources["ask"])
	fmt.Println(r.Skipped[0])
	fmt.Println(r.Patterns())
	fmt.Println(r.Warnings[0])
	// Output:
	// allowlist agents.*
	// on-miss defaults
	// agents.dev.ask "sometimes" is not valid (accepted: off, on-miss, always); using defaults ("on-miss")
	// [/usr/bin/git rg]
	// agents.dev.allowlist[0]: pattern "rg" has no '/': patterns match absolute paths, so it matches nothing (did you mean "/usr/bin/rg"?)
}

// Every change is lock → re-read → change → write, so concurrent writers
// never lose each other's entries.
func ExampleStore_Update() {
	dir, _ := os.MkdirTemp("", "state")
	defer os.RemoveAll(dir)
	s := approvals.NewStore(filepath.Join(dir, "state"))
	f, err := s.Update(func(f *approvals.File) error {
		f.AddPattern("*", "/usr/bin/git")
		return nil
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(f.ResolvePolicy("any").Patterns(), len(f.Socket.Token) >= 32)
	// Output: [/usr/bin/git] true
}
