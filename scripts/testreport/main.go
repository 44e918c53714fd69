// Command testreport reads `go test -json` on stdin and prints what a
// person needs from a full run: each package's result line, the whole
// output of every failing test (and of a package that failed outside its
// tests, or died while a test ran: that test's output, stack dump
// included), and at the end every skipped test with its reason, so a skip —
// a dependency that was absent, say — is never invisible.
//
//	go test -json ./... | go run ./scripts/testreport
//
// It exits 0 whatever the tests did (the shell keeps go test's status with
// pipefail), and 1 only when its input is not test2json.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

// event is one test2json record (cmd/test2json).
type event struct {
	Action  string
	Package string
	Test    string
	Output  string
}

// skip is one skipped test and its reason.
type skip struct{ pkg, test, reason string }

// maxLine bounds one JSON line (a test's single output line can be long).
const maxLine = 16 << 20

func main() {
	skips, err := report(os.Stdin, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testreport:", err)
		os.Exit(1)
	}
	printSkips(os.Stdout, skips)
}

// report copies the interesting output of events from r to w and returns
// the skipped tests.
func report(r io.Reader, w io.Writer) ([]skip, error) {
	type key struct{ pkg, test string }
	buf := map[key][]string{}
	var skips []skip
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxLine)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if err := json.Unmarshal(line, &e); err != nil {
			// Not an event (go vet or build output before the JSON):
			// show it as it is.
			fmt.Fprintln(w, string(line))
			continue
		}
		k := key{e.Package, e.Test}
		switch e.Action {
		case "output":
			if e.Test == "" {
				fmt.Fprint(w, e.Output) // package lines: ok/FAIL, build errors
				continue
			}
			buf[k] = append(buf[k], e.Output)
		case "pass":
			delete(buf, k)
		case "fail":
			if e.Test != "" {
				fmt.Fprint(w, strings.Join(buf[k], ""))
				delete(buf, k)
				continue
			}
			// The package failed: a test that never ended was running
			// when the binary died (a panic, -timeout's stack dump, a
			// SIGQUIT), and its output holds the why. Show it.
			var open []string
			for bk := range buf {
				if bk.pkg == e.Package {
					open = append(open, bk.test)
				}
			}
			sort.Strings(open)
			for _, name := range open {
				fmt.Fprintf(w, "=== %s %s never finished; its output:\n%s", e.Package, name, strings.Join(buf[key{e.Package, name}], ""))
				delete(buf, key{e.Package, name})
			}
		case "skip":
			if e.Test != "" {
				skips = append(skips, skip{e.Package, e.Test, reason(buf[k])})
			}
			delete(buf, k)
		}
	}
	return skips, sc.Err()
}

// reason is a skipped test's own lines (t.Skip's message), without the
// framework's === and --- lines.
func reason(lines []string) string {
	var out []string
	for _, l := range lines {
		t := strings.TrimSpace(l)
		if t == "" || strings.HasPrefix(t, "=== ") || strings.HasPrefix(t, "--- SKIP") {
			continue
		}
		out = append(out, t)
	}
	if len(out) == 0 {
		return "(no reason given)"
	}
	return strings.Join(out, " / ")
}

func printSkips(w io.Writer, skips []skip) {
	sort.Slice(skips, func(i, j int) bool {
		if skips[i].pkg != skips[j].pkg {
			return skips[i].pkg < skips[j].pkg
		}
		return skips[i].test < skips[j].test
	})
	fmt.Fprintf(w, "\n=== skipped tests: %d\n", len(skips))
	for _, s := range skips {
		fmt.Fprintf(w, "SKIP %s %s: %s\n", s.pkg, s.test, s.reason)
	}
}
