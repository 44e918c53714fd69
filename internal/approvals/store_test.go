package approvals

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/exechost/exechost/internal/testproc"
)

// Environment of the child processes TestConcurrentProcesses starts from
// this test binary.
const (
	envChildDir   = "APPROVALS_TEST_CHILD_STATE_DIR"
	envChildIndex = "APPROVALS_TEST_CHILD_INDEX"
	childAdds     = 50
)

func TestMain(m *testing.M) {
	if dir := os.Getenv(envChildDir); dir != "" {
		os.Exit(childMain(dir, os.Getenv(envChildIndex)))
	}
	os.Exit(m.Run())
}

// childMain adds childAdds unique patterns, one Update each, as a separate
// exechost process would.
func childMain(dir, index string) int {
	s := NewStore(dir)
	for j := range childAdds {
		p := fmt.Sprintf("/opt/c%s/bin/p%d", index, j)
		if _, err := s.Update(func(f *File) error {
			if !f.AddPattern("*", p) {
				return fmt.Errorf("pattern %s already present", p)
			}
			return nil
		}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	return 0
}

func newTestStore(t *testing.T) *Store {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "state")
	s := NewStore(dir)
	s.Home = "/home/test"
	return s
}

func TestConcurrentProcesses(t *testing.T) {
	const n = 8
	s := newTestStore(t)
	if _, err := s.Ensure(); err != nil {
		t.Fatal(err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmds := make([]*exec.Cmd, n)
	outs := make([]strings.Builder, n)
	for i := range n {
		c := exec.Command(exe, "-test.run=^$")
		c.Env = append(os.Environ(), envChildDir+"="+s.StateDir, envChildIndex+"="+strconv.Itoa(i))
		c.Stdout, c.Stderr = &outs[i], &outs[i]
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		cmds[i] = c
	}
	for i, c := range cmds {
		if err := c.Wait(); err != nil {
			t.Errorf("child %d: %v\n%s", i, err, outs[i].String())
		}
	}
	f, err := s.Load()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, p := range f.ResolvePolicy("*").Patterns() {
		got[p]++
	}
	for i := range n {
		for j := range childAdds {
			if p := fmt.Sprintf("/opt/c%d/bin/p%d", i, j); got[p] != 1 {
				t.Errorf("pattern %s present %d times, want 1", p, got[p])
			}
		}
	}
	if len(got) != n*childAdds {
		t.Errorf("%d distinct patterns, want %d", len(got), n*childAdds)
	}
	assertOnlyFiles(t, s.StateDir, "exec-approvals.json", "exec-approvals.json.lock")
}

func TestConcurrentGoroutines(t *testing.T) {
	s := newTestStore(t)
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			for j := range 10 {
				p := fmt.Sprintf("/g%d/p%d", i, j)
				if _, err := s.Update(func(f *File) error { f.AddPattern("dev", p); return nil }); err != nil {
					t.Error(err)
				}
			}
		})
	}
	testproc.WaitGroup(t, &wg, "the concurrent writers")
	f, err := s.Load()
	if err != nil {
		t.Fatal(err)
	}
	if n := len(f.Agents["dev"].Allowlist); n != 40 {
		t.Errorf("%d entries, want 40", n)
	}
}

// assertOnlyFiles fails if dir holds anything besides names (a temp file
// left behind, say).
func assertOnlyFiles(t *testing.T, dir string, names ...string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range ents {
		got = append(got, e.Name())
	}
	if d := cmp.Diff(names, got); d != "" {
		t.Errorf("files in %s (-want +got):\n%s", dir, d)
	}
}

func TestLoadMissingAndEnsure(t *testing.T) {
	s := newTestStore(t)
	f, err := s.Load()
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(Default().Redacted().Hash(), f.Hash()); d != "" {
		t.Errorf("Load of a missing file is not Default")
	}
	if _, err := os.Stat(s.StateDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Load created the state directory: %v", err)
	}

	e, err := s.Ensure()
	if err != nil {
		t.Fatal(err)
	}
	if e.Socket.Token == "" || e.Socket.Path != filepath.Join(s.StateDir, "exec-approvals.sock") {
		t.Errorf("Ensure socket = %+v", e.Socket)
	}
	if got := s.SocketPath(e); got != filepath.Join(s.StateDir, "exec-approvals.sock") {
		t.Errorf("SocketPath = %q", got)
	}
	again, err := s.Ensure()
	if err != nil {
		t.Fatal(err)
	}
	if again.Socket.Token != e.Socket.Token {
		t.Error("Ensure replaced an existing token")
	}
	var doc map[string]any
	data, err := os.ReadFile(s.Path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"version":  1.0,
		"socket":   map[string]any{"path": e.Socket.Path, "token": e.Socket.Token},
		"defaults": map[string]any{"security": "deny", "ask": "on-miss", "askFallback": "deny"},
		"agents":   map[string]any{},
	}
	if d := cmp.Diff(want, doc); d != "" {
		t.Errorf("written file (-want +got):\n%s", d)
	}
}

func TestEnsureAddsMissingToken(t *testing.T) {
	s := newTestStore(t)
	writeRaw(t, s, `{"version": 1, "socket": {"path": "~/x.sock"}, "agents": {"*": {"allowlist": [{"id": "a", "pattern": "/usr/bin/rg"}]}}}`)
	f, err := s.Ensure()
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Socket.Token) < 32 {
		t.Errorf("token = %q", f.Socket.Token)
	}
	if f.Socket.Path != "~/x.sock" || s.SocketPath(f) != "/home/test/x.sock" {
		t.Errorf("socket path = %q → %q", f.Socket.Path, s.SocketPath(f))
	}
	if got := f.ResolvePolicy("x").Patterns(); !cmp.Equal(got, []string{"/usr/bin/rg"}) {
		t.Errorf("patterns = %q", got)
	}
}

func writeRaw(t *testing.T, s *Store, content string) {
	t.Helper()
	if err := os.MkdirAll(s.StateDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(s.Path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestUnparseableFileIsNeverOverwritten checks every operation on a broken
// file: each fails with the position, and the file stays byte-identical.
func TestUnparseableFileIsNeverOverwritten(t *testing.T) {
	const broken = "{\n  \"version\": 1,\n  \"agents\": {\"dev\": {\"allowlist\": \"x\"}}\n}\n"
	tests := []struct {
		content string
		pos     string
	}{
		{broken, ":3:35:"},
		{"{\n  \"version\": 1,\n  \"defaults\": {\"security\": \"full\",}\n}\n", ":3:35:"},
		{`{"version": 7, "agents": {}}`, ":1:13:"},
	}
	for _, tt := range tests {
		s := newTestStore(t)
		writeRaw(t, s, tt.content)
		ops := map[string]func() error{
			"Load":   func() error { _, err := s.Load(); return err },
			"Ensure": func() error { _, err := s.Ensure(); return err },
			"Update": func() error {
				_, err := s.Update(func(f *File) error { f.AddPattern("*", "/x/y"); return nil })
				return err
			},
			"UpdateIf": func() error { _, err := s.UpdateIf(Default().Hash(), func(*File) error { return nil }); return err },
		}
		for name, op := range ops {
			err := op()
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Errorf("%s: error %v, want *ParseError", name, err)
				continue
			}
			if !strings.Contains(err.Error(), s.Path+tt.pos) || !strings.Contains(err.Error(), "hint:") {
				t.Errorf("%s: error %q lacks %s%s or a hint", name, err, s.Path, tt.pos)
			}
		}
		data, err := os.ReadFile(s.Path)
		if err != nil {
			t.Fatal(err)
		}
		if string(data) != tt.content {
			t.Errorf("broken file was changed:\n%s", data)
		}
		assertOnlyFiles(t, s.StateDir, "exec-approvals.json", "exec-approvals.json.lock")
	}
}

func TestUpdateKeepsUnknownFields(t *testing.T) {
	s := newTestStore(t)
	// A complete, normalized file: the rewrite changes only what the
	// mutation touched.
	in := strings.Replace(everyLevel, `"dev": {`, `"dev": {"allowlist": [{"id": "d1", "pattern": "/opt/x/rg", "z": [1]}], `, 1)
	in = strings.Replace(in, `"allowlist": [], `, ``, 1)
	writeRaw(t, s, in)
	at := time.UnixMilli(1_800_000_000_000)
	if _, err := s.Update(func(f *File) error {
		if !f.RecordUse("dev", "/opt/x/rg", "rg x", "/opt/x/rg", at) {
			return errors.New("no entry")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	var want, got map[string]any
	if err := json.Unmarshal([]byte(in), &want); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(s.Path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	entry := want["agents"].(map[string]any)["dev"].(map[string]any)["allowlist"].([]any)[0].(map[string]any)
	entry["lastUsedAt"] = 1.8e12
	entry["lastUsedCommand"] = "rg x"
	entry["lastResolvedPath"] = "/opt/x/rg"
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("rewritten file (-want +got):\n%s", d)
	}
}

func TestUpdateIf(t *testing.T) {
	s := newTestStore(t)
	base, err := s.Load()
	if err != nil {
		t.Fatal(err)
	}
	h := base.Hash()
	if _, err := s.UpdateIf(h, func(f *File) error { f.AddPattern("*", "/a/b"); return nil }); err != nil {
		t.Fatalf("UpdateIf on a missing file with Default's hash: %v", err)
	}
	// The first write filled in the socket path: the old hash is stale now.
	_, err = s.UpdateIf(h, func(f *File) error { f.AddPattern("*", "/c/d"); return nil })
	if !errors.Is(err, ErrStale) || !strings.Contains(err.Error(), "hint:") {
		t.Fatalf("UpdateIf with a stale hash = %v, want ErrStale with a hint", err)
	}
	cur, err := s.Load()
	if err != nil {
		t.Fatal(err)
	}
	if got := cur.ResolvePolicy("*").Patterns(); !cmp.Equal(got, []string{"/a/b"}) {
		t.Errorf("patterns after a refused UpdateIf = %q", got)
	}
	// A token-only change is not a conflict (editors never see the token).
	if _, err := s.Update(func(f *File) error { f.Socket.Token = "other"; return nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpdateIf(cur.Hash(), func(f *File) error { f.AddPattern("*", "/c/d"); return nil }); err != nil {
		t.Errorf("UpdateIf with the current hash: %v", err)
	}
}

func TestUpdateFnErrorWritesNothing(t *testing.T) {
	s := newTestStore(t)
	boom := errors.New("boom")
	_, err := s.Update(func(f *File) error { f.AddPattern("*", "/x/y"); return boom })
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v, want boom", err)
	}
	if _, err := os.Stat(s.Path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("file written despite the error: %v", err)
	}
}

func TestSymlinkRefused(t *testing.T) {
	s := newTestStore(t)
	if err := os.MkdirAll(s.StateDir, 0o700); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(t.TempDir(), "real.json")
	const content = `{"version": 1, "defaults": {"security": "allowlist"}}`
	if err := os.WriteFile(target, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, s.Path); err != nil {
		t.Skipf("symlinks unavailable: %v", err)
	}
	// Reading through the link is fine …
	f, err := s.Load()
	if err != nil {
		t.Fatalf("Load through a symlink: %v", err)
	}
	if f.ResolvePolicy("x").Local.Security != "allowlist" {
		t.Errorf("Load read the wrong file")
	}
	// … writing is not.
	for name, op := range map[string]func() error{
		"Ensure": func() error { _, err := s.Ensure(); return err },
		"Update": func() error { _, err := s.Update(func(f *File) error { return nil }); return err },
	} {
		if err := op(); !errors.Is(err, ErrSymlink) || !strings.Contains(err.Error(), "hint:") {
			t.Errorf("%s through a symlink = %v, want ErrSymlink with a hint", name, err)
		}
	}
	if data, _ := os.ReadFile(target); string(data) != content {
		t.Errorf("symlink target changed: %s", data)
	}
	if fi, err := os.Lstat(s.Path); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("symlink replaced: %v", err)
	}
}

func TestNotRegularFileRefused(t *testing.T) {
	s := newTestStore(t)
	if err := os.MkdirAll(s.Path, 0o700); err != nil { // a directory where the file should be
		t.Fatal(err)
	}
	if _, err := s.Load(); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("Load = %v", err)
	}
	if _, err := s.Ensure(); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("Ensure = %v", err)
	}
}

func BenchmarkUpdate(b *testing.B) {
	s := NewStore(filepath.Join(b.TempDir(), "state"))
	if _, err := s.Update(func(f *File) error {
		for i := range 100 {
			f.AddPattern("*", fmt.Sprintf("/opt/bench/bin/p%d", i))
		}
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		if _, err := s.Update(func(f *File) error {
			f.RecordUse("dev", "/opt/bench/bin/p7", "p7 "+strconv.Itoa(i), "/opt/bench/bin/p7", time.UnixMilli(int64(i)))
			return nil
		}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkLoadResolve(b *testing.B) {
	s := NewStore(filepath.Join(b.TempDir(), "state"))
	if _, err := s.Update(func(f *File) error {
		for i := range 1000 {
			f.AddPattern("*", fmt.Sprintf("/opt/bench/bin%d/p", i))
		}
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		f, err := s.Load()
		if err != nil {
			b.Fatal(err)
		}
		_ = f.ResolvePolicy("dev")
	}
}

// TestStoreSame: Same reports true only for the file's exact bytes —
// including a difference past the first read buffer, and a file of the
// same size — and false for a missing file.
func TestStoreSame(t *testing.T) {
	s := NewStore(t.TempDir())
	if s.Same(nil) || s.Same([]byte("{}")) {
		t.Error("Same is true for a missing file")
	}
	data := bytes.Repeat([]byte("0123456789abcdef"), 5000) // 80 KB: several reads
	if err := os.WriteFile(s.Path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if !s.Same(data) {
		t.Error("Same is false for the file's own bytes")
	}
	last := bytes.Clone(data)
	last[len(last)-1] ^= 1
	for name, want := range map[string][]byte{
		"last byte differs": last,
		"shorter":           data[:len(data)-1],
		"longer":            append(bytes.Clone(data), 'x'),
		"empty":             nil,
	} {
		if s.Same(want) {
			t.Errorf("%s: Same is true", name)
		}
	}
}
