// Command testreport reads `go test -json` on stdin and prints what a
// person needs from a full run: each package's result line, the whole
// output of every failing test (and of a package that failed outside its
// tests, or died while a test ran: that test's output, stack dump
// included), and at the end every skipped test with its reason, so a skip —
// a dependency that was absent, say — is never invisible — and the slowest
// top-level tests, so a suite that grows slow shows where.
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
	Elapsed float64 // seconds, on pass/fail/skip
}

// timing is one top-level test's running time.
type timing struct {
	pkg, test string
	secs      float64
}

// slowest is how many of the slowest top-level tests are listed.
const slowest = 15

// skip is one skipped test and its reason.
type skip struct{ pkg, test, reason string }

// maxLine bounds one JSON line (a test's single output line can be long).
const maxLine = 16 << 20

func main() {
	skips, times, err := report(os.Stdin, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testreport:", err)
		os.Exit(1)
	}
	printSlowest(os.Stdout, times)
	printSkips(os.Stdout, skips)
}

// report copies the interesting output of events from r to w and returns
// the skipped tests and the running time of each top-level test.
func report(r io.Reader, w io.Writer) ([]skip, []timing, error) {
	type key struct{ pkg, test string }
	buf := map[key][]string{}
	var skips []skip
	var times []timing
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
		if (e.Action == "pass" || e.Action == "fail") && e.Test != "" && !strings.Contains(e.Test, "/") {
			times = append(times, timing{e.Package, e.Test, e.Elapsed})
		}
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
	return skips, times, sc.Err()
}

// printSlowest lists the slowest top-level tests, slowest first.
func printSlowest(w io.Writer, times []timing) {
	sort.SliceStable(times, func(i, j int) bool { return times[i].secs > times[j].secs })
	if len(times) > slowest {
		times = times[:slowest]
	}
	fmt.Fprintf(w, "\n=== slowest tests: %d\n", len(times))
	for _, t := range times {
		fmt.Fprintf(w, "%7.1fs %s %s\n", t.secs, t.pkg, t.test)
	}
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
