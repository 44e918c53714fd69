package archtest

import (
	"go/build"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

const module = "github.com/exechost/exechost/"

// rank places every package of the module in a layer (CONTRIBUTING.md,
// "Package layering", with the mechanisms layer spelled out): a package
// may import only packages of a strictly lower rank. Two packages of one
// rank never import each other, so a daemon cannot import a UI, and a UI
// cannot import a daemon. A new package fails TestLayering until it is
// placed here.
var rank = map[string]int{
	// the bottom: the re-exec registry, which every package with an entry
	// point imports (the reaper and the launcher among the leaves)
	"internal/reexec": -1,
	// and the hint an error carries, which any package may attach
	"internal/hint": -1,
	// leaves: the standard library only (and the registry and hint)
	"internal/policy": 0, "internal/inflight": 0, "internal/idprefix": 0, "internal/state": 0,
	"internal/atomicfile": 0, "internal/textsafe": 0, "internal/logging": 0, "internal/reaper": 0,
	"internal/metrics": 0, "internal/testdep": 0, "internal/testproc": 0, "internal/archtest": 0, "internal/fschange": 0,
	"internal/confine": 0, "internal/reexec/reexectest": 0, "internal/peeruid": 0, "internal/egress": 0, "internal/egress/egresstest": 0, "internal/netrelay": 0,
	// mechanisms over the leaves
	"internal/bridge": 1, "internal/nodekey": 1, "internal/audit": 1, "internal/prompt": 1, "internal/trace": 1,
	"internal/runner": 1, "internal/shellcmd": 1, "internal/service": 1,
	"internal/openclaw/octest": 1, "internal/sandbox/docker/dockertest": 1, "internal/sandbox/kubernetes/kubeapi": 1,
	"internal/approvals": 2, "internal/approverui": 2, "internal/shellrun": 2, "internal/sandbox": 2, "internal/sandbox/agent": 2,
	"internal/session": 2, "internal/jail": 2, "internal/receipt": 2,
	"internal/sandbox/agentbox": 3, "internal/client": 3, "internal/config": 3, "internal/explain": 3, "internal/sandbox/kubernetes/kubetest": 3,
	// the approval socket: below the execution host (the approver's exec
	// host, which runs a host.Engine, is internal/approver's)
	"internal/asksock":       3,
	"internal/sandbox/bwrap": 4, "internal/sandbox/docker": 4, "internal/sandbox/kubernetes": 4,
	"internal/sandbox/pick": 5,
	// the execution host: never the approval socket or a UI
	"internal/host": 5,
	// approval routing (wraps a host.Prompter)
	"internal/approvalroute": 6,
	// daemons and UIs: neither imports the other
	"internal/gateway": 8, "internal/node": 8, "internal/openclaw": 8, "internal/mcpserver": 8,
	"internal/approverui/tui": 8, "internal/approverui/web": 8, "internal/approver": 8,
	// the composition root
	"internal/cli": 9,
	// programs and the suites that drive them as processes
	"cmd/exechost": 10, "bench": 10, "internal/e2e": 10, "internal/faults": 10, "scripts/testreport": 10,
}

// forbidden holds imports the ranks alone would allow (or would allow
// after a careless re-rank), each with why it must not exist.
var forbidden = map[[2]string]string{
	{"internal/asksock", "internal/host"}: "the approval socket ranks below the execution host; the approver's exec host is internal/approver's EngineExecutor",
	// The gateway explains a denial from what the host sent; it parses no
	// command (the host's DenialError carries the construct).
	{"internal/gateway", "internal/shellcmd"}: "the gateway imports no analysis: the execution host sends the denial's construct",
	{"internal/explain", "internal/shellcmd"}: "explain (which the gateway imports) analyses nothing: the execution host sends the denial's construct",
}

// TestLayering reads the imports of every package's non-test files, for
// each platform the binary is built for, and fails on an import that
// points up (or sideways within a rank).
func TestLayering(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		name := d.Name()
		if path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules" || name == "bin") {
			return filepath.SkipDir
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		for _, goos := range []string{"linux", "darwin", "windows"} {
			ctx := build.Default
			ctx.GOOS = goos
			ctx.CgoEnabled = false
			pkg, err := ctx.ImportDir(path, 0)
			if err != nil {
				continue // no Go files for this platform (or none at all)
			}
			seen[rel] = true
			r, ok := rank[rel]
			if !ok {
				t.Errorf("%s is not placed in a layer (hint: add it to rank in %s and to CONTRIBUTING.md's layering table)", rel, "internal/archtest/layers_test.go")
				break
			}
			for _, imp := range pkg.Imports {
				dep, ok := strings.CutPrefix(imp, module)
				if !ok {
					continue
				}
				if why, ok := forbidden[[2]string{rel, dep}]; ok {
					t.Errorf("%s (%s) imports %s: %s", rel, goos, dep, why)
				}
				dr, known := rank[dep]
				if known && dr < r {
					continue
				}
				t.Errorf("%s (rank %d, %s) imports %s (rank %d): imports must point down (CONTRIBUTING.md, \"Package layering\")", rel, r, goos, dep, dr)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var stale []string
	for p := range rank {
		if _, err := os.Stat(filepath.Join(root, p)); err != nil || !seen[p] {
			stale = append(stale, p)
		}
	}
	sort.Strings(stale)
	if len(stale) > 0 {
		t.Errorf("rank names packages that do not exist: %v", stale)
	}
}
