package shellcmd

import (
	"os"
	"path/filepath"
	"testing"
)

// TestReadLogKeepsFirstReads: the log answers a path with its first read,
// and an analysis whose path read differently the second time is not
// remembered (export leaves the log inexact); read the same, it is.
func TestReadLogKeepsFirstReads(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	read := func() (factRead, factResult, bool) {
		fi, err := os.Lstat(p)
		r := factRead{factKey{opLstat, p}, fi, "", err}
		res, ok := r.result()
		return r, res, ok
	}
	missing, mres, mok := read()
	if err := os.WriteFile(p, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	present, pres, pok := read()

	var same readLog
	same.add(missing, mres, mok)
	same.add(missing, mres, mok)
	var out factLog
	same.export(&out)
	if !out.exact || len(out.facts) != 1 {
		t.Fatalf("a path read the same twice: exact %v, %d facts; want one exact fact", out.exact, len(out.facts))
	}

	var changed readLog
	changed.add(missing, mres, mok)
	changed.add(present, pres, pok)
	if i := changed.find(missing.factKey); i < 0 || changed.list[i].err == nil {
		t.Fatalf("the log does not answer with the first read: %+v", changed.list)
	}
	out = factLog{}
	changed.export(&out)
	if out.exact {
		t.Fatal("an analysis that read a path two ways would be remembered")
	}
}
