package e2e

import (
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
	"github.com/rogpeppe/go-internal/txtar"
)

// TestScripts runs the CLI flows in testdata/script against the built
// binary: usage errors, hints, config errors, the exit-code contract
// (exit_codes.txtar, the table of docs/cli.md) and the README's tour
// against a real `exechost up` (readme_tour.txtar).
//
// Every script gets its own state directory and a free loopback port in
// $EXECHOST_GATEWAY, which every --gateway flag defaults to and `up`
// listens on, so the tour's commands run as written.
func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir: "testdata/script",
		Setup: func(env *testscript.Env) error {
			env.Setenv("PATH", filepath.Dir(bin)+string(os.PathListSeparator)+env.Getenv("PATH"))
			env.Setenv("OPENCLAW_STATE_DIR", filepath.Join(env.WorkDir, "state"))
			env.Setenv("EXECHOST_GATEWAY_TOKEN", "")
			// A real home: a node runs commands there by default.
			home := filepath.Join(env.WorkDir, "home")
			if err := os.Mkdir(home, 0o700); err != nil {
				return err
			}
			env.Setenv("HOME", home)
			port, err := freePort()
			if err != nil {
				return err
			}
			env.Setenv("EXECHOST_GATEWAY", "ws://127.0.0.1:"+port)
			return nil
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"exits":      cmdExits,
			"waitnode":   cmdWaitNode,
			"stdout2env": cmdStdoutToEnv,
			"joinline":   cmdJoinLine,
		},
	})
}

// freePort returns a loopback port that was free a moment ago.
func freePort() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	_, port, err := net.SplitHostPort(ln.Addr().String())
	return port, err
}

// cmdExits is `exits N PROGRAM ARGS…`: run the program and fail unless it
// exits with exactly status N. Its stdout and stderr are kept for the
// script's stdout/stderr checks, as with exec.
func cmdExits(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: exits N program [args...]")
	}
	want, err := strconv.Atoi(args[0])
	if err != nil {
		ts.Fatalf("exits: bad status %q", args[0])
	}
	err = ts.Exec(args[1], args[2:]...)
	got := 0
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		got = ee.ExitCode()
	case err != nil:
		ts.Fatalf("exits: %v", err)
	}
	if got != want {
		ts.Fatalf("%s exited %d, want %d", strings.Join(args[1:], " "), got, want)
	}
}

// waitNodeLimit bounds waitnode. It is a deadline, not a timing assertion.
const waitNodeLimit = 60 * time.Second

// cmdWaitNode is `waitnode NAME`: wait until `exechost nodes list` (at
// $EXECHOST_GATEWAY) shows a connected node whose line contains NAME.
func cmdWaitNode(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: waitnode NAME")
	}
	deadline := time.Now().Add(waitNodeLimit)
	for {
		if ts.Exec(bin, "nodes", "list") == nil {
			for line := range strings.SplitSeq(ts.ReadFile("stdout"), "\n") {
				if strings.Contains(line, args[0]) && strings.Contains(line, " connected ") {
					return
				}
			}
		}
		if time.Now().After(deadline) {
			ts.Fatalf("no connected node %q after %s", args[0], waitNodeLimit)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// cmdStdoutToEnv is `stdout2env NAME`: set $NAME to the last command's
// stdout, trimmed (a script has no command substitution).
func cmdStdoutToEnv(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: stdout2env NAME")
	}
	v := strings.TrimSpace(ts.ReadFile("stdout"))
	if v == "" {
		ts.Fatalf("stdout2env %s: the last stdout is empty", args[0])
	}
	ts.Setenv(args[0], v)
}

// cmdJoinLine is `joinline NAME EXTRA…`: take the node line the last
// command (`gateway join-key`) printed on stderr, check that the README
// tour's `echo K | …` line is exactly that line (its placeholders K and
// ws://GW:18789 standing for this key and gateway) followed by EXTRA, and
// set $NAME to the README's line, and run it with sh in the background
// (with $OPENCLAW_STATE_DIR as set then; stopped when the script ends): the
// tour uses the printed line as printed.
func cmdJoinLine(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 1 {
		ts.Fatalf("usage: joinline NAME [EXTRA...]")
	}
	var printed string
	for line := range strings.SplitSeq(ts.ReadFile("stderr"), "\n") {
		if l := strings.TrimSpace(line); strings.HasPrefix(l, "echo ") && strings.Contains(l, " | exechost node run ") {
			printed = l
		}
	}
	if printed == "" {
		ts.Fatalf("the last command printed no `echo KEY | exechost node run …` line")
	}
	key := strings.Fields(printed)[1]
	readme, err := os.ReadFile("../../README.md")
	ts.Check(err)
	var tour string
	for line := range strings.SplitSeq(string(readme), "\n") {
		if strings.HasPrefix(line, tourJoinPrefix) {
			tour, _, _ = strings.Cut(line, "  #")
			tour = strings.TrimSpace(tour)
		}
	}
	if tour == "" {
		ts.Fatalf("README.md has no tour line starting %q", tourJoinPrefix)
	}
	tour = strings.NewReplacer(tourJoinPrefix, "echo "+key+" | ", "ws://GW:18789", ts.Getenv("EXECHOST_GATEWAY")).Replace(tour)
	want := strings.Join(append([]string{printed}, args[1:]...), " ")
	if tour != want {
		ts.Fatalf("the README's node line is not the printed one plus %q:\n README:  %s\n printed: %s", args[1:], tour, printed)
	}
	ts.Setenv(args[0], tour)
	// Run it in the background in its own process group: a signal to the
	// shell alone would leave the node of its pipeline running.
	cmd := exec.Command("sh", "-c", tour)
	cmd.Dir = ts.Getenv("WORK")
	for _, k := range []string{"PATH", "HOME", "OPENCLAW_STATE_DIR", "EXECHOST_GATEWAY", "EXECHOST_GATEWAY_TOKEN", "TMPDIR"} {
		cmd.Env = append(cmd.Env, k+"="+ts.Getenv(k))
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	ts.Check(cmd.Start())
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	ts.Defer(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
	})
}

// tourJoinPrefix starts the README tour's node line, the one `gateway
// join-key` prints (with the key K).
const tourJoinPrefix = "echo K | "

// tourSubstitutions are the README tour's placeholders and what
// readme_tour.txtar runs in their place.
var tourSubstitutions = strings.NewReplacer("ws://GW:18789", "$EXECHOST_GATEWAY")

// TestReadmeTourInSync keeps readme_tour.txtar honest: every command of
// the README's tour is run there as written (after tourSubstitutions; a
// script line may add arguments or `&`), marked `# skipped: …`, or, for
// an `echo '…' > F` line, present as file F with that content.
func TestReadmeTourInSync(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, tour, ok := strings.Cut(string(readme), "## A short tour")
	if !ok {
		t.Fatal("README has no \"## A short tour\" section")
	}
	_, tour, ok = strings.Cut(tour, "```sh\n")
	if !ok {
		t.Fatal("the tour has no ```sh block")
	}
	tour, _, _ = strings.Cut(tour, "```")
	ar, err := txtarFile("testdata/script/readme_tour.txtar")
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for line := range strings.SplitSeq(ar.script, "\n") {
		lines = append(lines, strings.Join(strings.Fields(line), " "))
	}
	n := 0
	for raw := range strings.SplitSeq(tour, "\n") {
		line := strings.TrimSpace(raw)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if i := strings.Index(line, "  #"); i >= 0 {
			line = strings.TrimSpace(line[:i])
		}
		line = strings.Join(strings.Fields(tourSubstitutions.Replace(line)), " ")
		n++
		if strings.HasPrefix(line, tourJoinPrefix) {
			// Run from the printed line by joinline, which compares it
			// with this README line when the script runs.
			if !slices.ContainsFunc(lines, func(l string) bool { return strings.HasPrefix(l, "joinline JOIN") }) {
				t.Errorf("tour line %q: readme_tour.txtar needs `joinline JOIN …`", line)
			}
			continue
		}
		if content, file, ok := echoToFile(line); ok {
			if got, found := ar.files[file]; !found || strings.TrimSpace(got) != content {
				t.Errorf("tour line %q: readme_tour.txtar needs file %s with that content", line, file)
			}
			continue
		}
		found := false
		for _, l := range lines {
			if strings.HasPrefix(l, "exec "+line) || strings.HasPrefix(l, "! exec "+line) || l == "# skipped: "+line {
				found = true
				break
			}
		}
		if !found {
			t.Errorf("tour line %q is not run by readme_tour.txtar", line)
		}
	}
	if n < 10 {
		t.Fatalf("found only %d tour commands; is the README parsed right?", n)
	}
}

// echoToFile recognises `echo 'CONTENT' > FILE`.
func echoToFile(line string) (content, file string, ok bool) {
	rest, ok := strings.CutPrefix(line, "echo '")
	if !ok {
		return "", "", false
	}
	i := strings.LastIndex(rest, "' > ")
	if i < 0 {
		return "", "", false
	}
	return rest[:i], rest[i+len("' > "):], true
}

// tourArchive is a txtar file's script and files.
type tourArchive struct {
	script string
	files  map[string]string
}

// txtarFile reads a txtar archive (the script, then "-- name --" files).
func txtarFile(path string) (tourArchive, error) {
	ar, err := txtar.ParseFile(path)
	if err != nil {
		return tourArchive{}, err
	}
	a := tourArchive{script: string(ar.Comment), files: map[string]string{}}
	for _, f := range ar.Files {
		a.files[f.Name] = string(f.Data)
	}
	return a, nil
}
