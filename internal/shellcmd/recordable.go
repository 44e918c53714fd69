package shellcmd

import (
	"fmt"
	"strings"
)

// Recordable returns the exact executable paths that an allow-always answer
// may persist for this analysis, deduplicated and in order, and a note for
// everything left out. Shells, interpreters, privilege changers and wrappers whose programs run are
// never recorded (allowing one allows everything it can run), and nothing is recorded from an analysis that failed. When paths
// is empty the notes say why, so a caller can tell the user that the
// approval applies once only.
func Recordable(a Analysis) (paths []string, notes []string) {
	if !a.OK {
		return nil, []string{"nothing can be recorded: the command could not be analysed (" + a.Error + ")"}
	}
	seen := map[string]bool{}
	for _, s := range a.Segments {
		label := describe(s)
		switch {
		case s.ResolvedPath == "":
			notes = append(notes, fmt.Sprintf("%s: %q did not resolve to an executable, so there is no path to record", label, s.Name))
		case s.Role == RoleShell:
			notes = append(notes, fmt.Sprintf("%s: the script's contents cannot be allowlisted, and a shell is never recorded", label))
		case s.Role == RoleInterpreter:
			notes = append(notes, fmt.Sprintf("%s: an interpreter runs any code it is given, so it is never recorded", label))
		case s.Role == RoleWrapper:
			notes = append(notes, fmt.Sprintf("%s: a wrapper runs whatever command it is given, so it is never recorded", label))
		case s.Role == RolePrivilege:
			notes = append(notes, fmt.Sprintf("%s: a privilege changer is never recorded; add it to the allowlist by hand if you mean it", label))
		case s.Role != RoleCommand:
			notes = append(notes, fmt.Sprintf("%s: unknown role %q is never recorded", label, s.Role))
		case !seen[s.ResolvedPath]:
			seen[s.ResolvedPath] = true
			paths = append(paths, s.ResolvedPath)
		}
	}
	if len(a.Segments) == 0 {
		notes = append(notes, "nothing can be recorded: the command runs no executable")
	}
	return paths, notes
}

// describe shortens a segment's argv for notes ("bash x.sh").
func describe(s Segment) string {
	argv := s.Argv
	if len(argv) == 0 {
		argv = []string{s.Name}
	}
	if len(argv) > 3 {
		argv = append(argv[:3:3], "…")
	}
	return strings.Join(argv, " ")
}
