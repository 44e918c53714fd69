package shellcmd

import (
	"sort"
	"strings"
)

// optSet describes a program's options the way getopt_long parses them,
// stopping at the first operand (these programs all parse options only up
// to the command they run).
type optSet struct {
	flags   string // short options without an argument
	withArg string // short options with a required argument
	optArg  string // short options with an optional, attached argument
	// long maps a long option to its key (a short letter or the long name).
	// A name ending in "=" requires an argument; in "?" takes an optional
	// "=value".
	long map[string]string
	// fail maps a key to why the option makes the analysis fail.
	fail map[string]string
}

// parseOpts parses leading options of args (the words after the program
// name). on is called for every option with its key and value. It returns
// the index of the first operand. Every word it consumes must be static:
// a run-time value could split into, or pose as, anything.
func parseOpts(prog string, args []arg, set optSet, tailOpen bool, on func(key, val string) error) (int, error) {
	i := 0
	for ; i < len(args); i++ {
		x := args[i]
		if !x.static {
			return 0, failf("run-time value %s among the options of %s", x.text, prog).hint("write options literally")
		}
		v := x.val
		if v == "--" {
			return i + 1, nil
		}
		if len(v) < 2 || v[0] != '-' {
			return i, nil
		}
		if strings.HasPrefix(v, "--") {
			name, val, hasVal := strings.Cut(v[2:], "=")
			full, err := matchLong(prog, name, set.long)
			if err != nil {
				return 0, err
			}
			key := set.long[full]
			switch {
			case strings.HasSuffix(full, "="):
				if !hasVal {
					i++
					if i >= len(args) {
						return 0, missingArg(prog, v, tailOpen)
					}
					if !args[i].static {
						return 0, failf("run-time value %s among the options of %s", args[i].text, prog)
					}
					val = args[i].val
				}
			case strings.HasSuffix(full, "?"):
			default:
				if hasVal {
					return 0, failf("%s: option --%s takes no value", prog, name)
				}
			}
			if why := set.fail[key]; why != "" {
				return 0, failf("%s %s %s", prog, v, why)
			}
			if err := on(key, val); err != nil {
				return 0, err
			}
			continue
		}
		for j := 1; j < len(v); j++ {
			c := v[j]
			key := string(c)
			if why := set.fail[key]; why != "" {
				return 0, failf("%s -%c %s", prog, c, why)
			}
			switch {
			case strings.IndexByte(set.flags, c) >= 0:
				if err := on(key, ""); err != nil {
					return 0, err
				}
			case strings.IndexByte(set.optArg, c) >= 0:
				if err := on(key, v[j+1:]); err != nil {
					return 0, err
				}
				j = len(v)
			case strings.IndexByte(set.withArg, c) >= 0:
				val := v[j+1:]
				if val == "" {
					i++
					if i >= len(args) {
						return 0, missingArg(prog, v, tailOpen)
					}
					if !args[i].static {
						return 0, failf("run-time value %s among the options of %s", args[i].text, prog)
					}
					val = args[i].val
				}
				if err := on(key, val); err != nil {
					return 0, err
				}
				j = len(v)
			default:
				return 0, failf("%s: unknown option -%c", prog, c).hint("options this analysis does not know fail closed")
			}
		}
	}
	if tailOpen {
		return 0, failf("%s receives options at run time", prog)
	}
	return i, nil
}

func missingArg(prog, opt string, tailOpen bool) error {
	if tailOpen {
		return failf("%s %s receives its value at run time", prog, opt)
	}
	return failf("%s: option %s requires a value", prog, opt)
}

// matchLong finds a long option by exact name or unambiguous prefix, as
// getopt_long does (so "--spl" is "--split-string").
func matchLong(prog, name string, long map[string]string) (string, error) {
	var cands []string
	for full := range long {
		bare := strings.TrimRight(full, "=?")
		if bare == name {
			return full, nil
		}
		if strings.HasPrefix(bare, name) && name != "" {
			cands = append(cands, full)
		}
	}
	if len(cands) == 1 {
		return cands[0], nil
	}
	sort.Strings(cands)
	if len(cands) > 1 {
		return "", failf("%s: option --%s is ambiguous", prog, name)
	}
	return "", failf("%s: unknown option --%s", prog, name).hint("options this analysis does not know fail closed")
}
