package audit

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"unicode/utf8"
)

// Bounds on what one record writes. Records are made for callers who
// choose their commands (and so the size of a denial's words), and a log
// rotated by size would otherwise let one caller's few large records push
// everyone's older ones out.
const (
	// MaxRecordCommand is the most of a command a record keeps: a longer
	// one is recorded by its SHA-256 and length, and this many bytes of
	// its start.
	MaxRecordCommand = 4 << 10
	// MaxRecordText bounds every other free-text field (reason, error,
	// change, cwd, one argv element).
	MaxRecordText = 4 << 10
	// MaxRecordArgv bounds the argv elements kept.
	MaxRecordArgv = 256
	// MaxRecordEnv bounds the environment entries kept.
	MaxRecordEnv = 128
)

// bound returns r with every caller-sized field within the bounds above.
func bound(r Record) Record {
	if len(r.Command) > MaxRecordCommand {
		sum := sha256.Sum256([]byte(r.Command))
		r.CommandSHA256, r.CommandBytes = hex.EncodeToString(sum[:]), len(r.Command)
		r.Command = prefix(r.Command, MaxRecordCommand)
	}
	r.Reason, r.Error, r.Change, r.Cwd = clip(r.Reason), clip(r.Error), clip(r.Change), clip(r.Cwd)
	if len(r.Argv) > 0 {
		n := min(len(r.Argv), MaxRecordArgv)
		argv := make([]string, n, n+1)
		for i := range n {
			argv[i] = clip(r.Argv[i])
		}
		if n < len(r.Argv) {
			argv = append(argv, fmt.Sprintf("…[%d more arguments]", len(r.Argv)-n))
		}
		r.Argv = argv
	}
	if len(r.Env) > MaxRecordEnv {
		env := make(map[string]string, MaxRecordEnv)
		for k, v := range r.Env {
			if len(env) == MaxRecordEnv {
				break
			}
			env[clip(k)] = clip(v)
		}
		r.Env = env
	}
	return r
}

// clip bounds s to MaxRecordText bytes, saying how much it left out.
func clip(s string) string {
	if len(s) <= MaxRecordText {
		return s
	}
	return prefix(s, MaxRecordText) + fmt.Sprintf("…[%d bytes in all]", len(s))
}

// prefix is at most n bytes of s, cut at a rune boundary.
func prefix(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
