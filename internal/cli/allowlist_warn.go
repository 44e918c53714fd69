package cli

import (
	"bufio"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/bmatcuk/doublestar/v4"
	"github.com/charmbracelet/x/term"

	"github.com/exechost/exechost/internal/policy"
	"github.com/exechost/exechost/internal/shellcmd"
)

// Bounds of the look at what a glob pattern matches on this machine.
const (
	// maxGlobMatches bounds the files a pattern's glob is expanded to.
	maxGlobMatches = 20000
	// globExamples is how many flagged programs a warning names.
	globExamples = 4
)

// allowlistWarnings says what allowlisting pattern allows beyond one
// ordinary program, with the classification the approver UIs show
// (shellcmd.RunsAnything: shells, interpreters, wrappers that run their
// arguments, privilege changers, find/git/make/…) and policy.LintPattern's
// broad-pattern check. A glob is expanded on this machine (for --node, the
// other machine may differ) and each program it matches is classified.
func allowlistWarnings(pattern string) []string {
	var out []string
	if w := policy.LintPattern(pattern); w != "" {
		out = append(out, w)
	}
	if !strings.ContainsAny(pattern, "*?[{") {
		if why, ok := shellcmd.RunsAnything(pattern); ok {
			out = append(out, fmt.Sprintf("%s can run anything: %s; allowlisting it allows every command it can be made to run", pattern, why))
		}
		return out
	}
	if before, _, ok := strings.Cut(pattern, "**"); ok {
		// Not expanded (it walks whole trees, through symlink loops).
		if len(out) == 0 {
			out = append(out, fmt.Sprintf("broad glob: %s matches at any depth under %s, shells and interpreters included if their names fit (not expanded)", pattern, filepath.Dir(before+"x")))
		}
		return out
	}
	p := pattern
	if rest, ok := strings.CutPrefix(p, "~/"); ok {
		if home, err := os.UserHomeDir(); err == nil {
			p = filepath.Join(home, rest)
		}
	}
	matched, flagged := 0, []string{}
	_ = doublestar.GlobWalk(os.DirFS("/"), strings.TrimPrefix(p, "/"), func(rel string, d fs.DirEntry) error {
		if d.IsDir() {
			return nil
		}
		if matched++; matched > maxGlobMatches {
			return fs.SkipAll
		}
		full := "/" + rel
		if why, ok := shellcmd.RunsAnything(full); ok {
			flagged = append(flagged, fmt.Sprintf("%s (%s)", full, why))
		}
		return nil
	})
	switch {
	case len(flagged) > 0:
		ex := flagged[:min(len(flagged), globExamples)]
		more := ""
		if len(flagged) > len(ex) {
			more = fmt.Sprintf(", and %d more", len(flagged)-len(ex))
		}
		out = append(out, fmt.Sprintf("broad glob: %s matches %d files on this machine, %d of which can run anything: %s%s",
			pattern, min(matched, maxGlobMatches), len(flagged), strings.Join(ex, ", "), more))
	case matched > 1 && strings.Trim(filepath.Base(pattern), "*?") == "":
		out = append(out, fmt.Sprintf("broad glob: %s matches every program in %s (%d on this machine), including any added later", pattern, filepath.Dir(pattern), matched))
	}
	return out
}

// confirmAllowlist shows the warnings and decides whether to add anyway:
// --yes does; on a terminal the user answers; otherwise (a script, an
// agent) nothing is added and the error says to pass --yes.
func (g *globals) confirmAllowlist(in io.Reader, pattern string, warnings []string, yes bool) error {
	for _, w := range warnings {
		fmt.Fprintf(g.stderr, "WARNING: %s\n", w)
	}
	if len(warnings) == 0 || yes {
		return nil
	}
	f, ok := in.(*os.File)
	if !ok || !term.IsTerminal(f.Fd()) {
		return usageHint("read the warnings above; pass --yes to add it anyway, or allowlist the exact programs instead", "not added: %s needs confirmation and stdin is not a terminal", pattern)
	}
	fmt.Fprintf(g.stderr, "add %s anyway? [y/N] ", pattern)
	line, _ := bufio.NewReader(in).ReadString('\n')
	if a := strings.ToLower(strings.TrimSpace(line)); a != "y" && a != "yes" {
		// The same outcome, and exit status (2), as off a terminal: the
		// addition was not confirmed.
		return usageHint("allowlist the exact programs instead, or pass --yes to add it anyway", "not added: %s was not confirmed", pattern)
	}
	return nil
}
