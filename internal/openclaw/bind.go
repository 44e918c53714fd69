package openclaw

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// ErrOperandChanged is OpenClaw's node host's refusal of an approved run
// whose script operand changed between system.run.prepare and system.run
// (APPROVAL_SCRIPT_OPERAND_DRIFT_DENIED_MESSAGE); exechost uses it for any
// file the approval was bound to.
var ErrOperandChanged = errors.New("SYSTEM_RUN_DENIED: approval script operand changed before execution")

// maxBindBytes bounds the bytes hashed for one bound file: a larger one is
// bound as "too large", which no longer matches once it changes size or
// kind, but its content is not compared (a script that size is not
// something a human reviewed either).
const maxBindBytes = 256 << 20

// Program is one program a plan runs: its argv as executed and the
// executable the analysis resolved ("" when it did not resolve).
type Program struct {
	Argv []string
	Path string
}

// boundFile is one file an approval is bound to: what the run depends on
// beyond its command text.
type boundFile struct {
	role   string // "executable" or "script"
	path   string // absolute, as the run names it
	real   string // path with symlinks resolved ("" when absent)
	digest string // "sha256:<hex>", "absent", "unreadable: …" or "too large"
}

// bindFiles returns the files a plan's run depends on: each resolved
// executable and, for the interpreters people hand a script (sh, bash,
// dash, python, node, perl, ruby), the script operand, relative to cwd.
// A script operand that does not exist is bound as absent: creating it
// later is a change.
func bindFiles(progs []Program, cwd string) []boundFile {
	var out []boundFile
	seen := map[string]bool{}
	add := func(role, path string) {
		if seen[role+"\x00"+path] {
			return
		}
		seen[role+"\x00"+path] = true
		real, digest := fileDigest(path)
		out = append(out, boundFile{role: role, path: path, real: real, digest: digest})
	}
	for _, p := range progs {
		if p.Path != "" {
			add("executable", p.Path)
		}
		name := p.Path
		if name == "" && len(p.Argv) > 0 {
			name = p.Argv[0]
		}
		if len(p.Argv) < 2 {
			continue
		}
		op := scriptOperand(interpreterKind(filepath.Base(name)), p.Argv[1:])
		if op == "" || op == "-" || strings.Contains(op, "…") {
			continue // none, stdin, or a word only known at run time
		}
		if !filepath.IsAbs(op) {
			op = filepath.Join(cwd, op)
		}
		add("script", filepath.Clean(op))
	}
	return out
}

// fileDigest resolves path and hashes its content.
func fileDigest(path string) (real, digest string) {
	real, err := filepath.EvalSymlinks(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", "absent"
	}
	if err != nil {
		return "", "unreadable: " + err.Error()
	}
	f, err := os.Open(real)
	if err != nil {
		return real, "unreadable: " + err.Error()
	}
	defer f.Close()
	fi, err := f.Stat()
	switch {
	case err != nil:
		return real, "unreadable: " + err.Error()
	case !fi.Mode().IsRegular():
		return real, "not a regular file: " + fi.Mode().Type().String()
	case fi.Size() > maxBindBytes:
		return real, "too large"
	}
	h := sha256.New()
	if _, err := io.Copy(h, io.LimitReader(f, maxBindBytes+1)); err != nil {
		return real, "unreadable: " + err.Error()
	}
	return real, "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// changed lists the bound files that now resolve elsewhere or hold other
// content, as "role path".
func changed(bound []boundFile) []string {
	var out []string
	for _, b := range bound {
		real, digest := fileDigest(b.path)
		if real != b.real || digest != b.digest {
			out = append(out, b.role+" "+b.path)
		}
	}
	return out
}

// describeBound is the line an operator's approval prompt shows about the
// bound files ("" when none): which scripts by content digest, and that the
// executables are too.
func describeBound(bound []boundFile) string {
	var scripts, exes []string
	for _, b := range bound {
		d := b.digest
		if strings.HasPrefix(d, "sha256:") {
			d = "sha256 " + d[len("sha256:"):len("sha256:")+12] + "…"
		}
		s := fmt.Sprintf("%s (%s)", b.path, d)
		if b.role == "script" {
			scripts = append(scripts, s)
		} else {
			exes = append(exes, s)
		}
	}
	if len(scripts) == 0 && len(exes) == 0 {
		return ""
	}
	var parts []string
	if len(scripts) > 0 {
		parts = append(parts, "script "+strings.Join(scripts, ", "))
	}
	if len(exes) > 0 {
		parts = append(parts, "executable "+strings.Join(exes, ", "))
	}
	return "[exechost binds this approval to " + strings.Join(parts, "; ") + ": a change before the run is refused]"
}

// interpreterKind names the family of a script interpreter by its base
// name ("" for anything else): python3.12 is python, bash is sh.
func interpreterKind(base string) string {
	switch {
	case base == "sh" || base == "bash" || base == "dash" || base == "zsh" || base == "ksh" || base == "mksh":
		return "sh"
	case base == "python" || strings.HasPrefix(base, "python2") || strings.HasPrefix(base, "python3"):
		return "python"
	case base == "node" || base == "nodejs":
		return "node"
	case base == "perl" || strings.HasPrefix(base, "perl5"):
		return "perl"
	case base == "ruby" || strings.HasPrefix(base, "ruby3"):
		return "ruby"
	}
	return ""
}

// Per interpreter: the options that take the next word as their value,
// and those after which no script file is read (inline code, a module, a
// command string).
var (
	valueOptions = map[string][]string{
		"sh":     {"-o", "+o", "-O", "+O", "--rcfile", "--init-file"},
		"python": {"-W", "-X", "--check-hash-based-pycs"},
		"node":   {"-r", "--require", "--import", "--loader", "--experimental-loader", "-C", "--conditions", "--env-file", "--input-type"},
		"perl":   {"-I", "-M", "-m", "-x"},
		"ruby":   {"-I", "-r", "-C", "-E", "--encoding"},
	}
	inlineOptions = map[string][]string{
		"sh":     {"-c"},
		"python": {"-c", "-m"},
		"node":   {"-e", "--eval", "-p", "--print"},
		"perl":   {"-e", "-E"},
		"ruby":   {"-e"},
	}
)

// scriptOperand returns the script file an interpreter of kind reads from
// args (its arguments after argv[0]), or "" when it reads none.
func scriptOperand(kind string, args []string) string {
	if kind == "" {
		return ""
	}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			if i+1 < len(args) {
				return args[i+1]
			}
			return ""
		}
		if !strings.HasPrefix(a, "-") && !(kind == "sh" && strings.HasPrefix(a, "+")) || a == "-" {
			return a
		}
		for _, o := range inlineOptions[kind] {
			// -c, and a cluster ending in it (sh -ec, python -uc).
			if a == o || len(o) == 2 && !strings.HasPrefix(a, "--") && strings.HasSuffix(a, o[1:]) && kind != "node" {
				return ""
			}
		}
		if strings.HasPrefix(a, "--eval=") || strings.HasPrefix(a, "--print=") {
			return ""
		}
		for _, o := range valueOptions[kind] {
			if a == o {
				i++ // its value is the next word
				break
			}
		}
	}
	return ""
}
