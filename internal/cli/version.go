package cli

import (
	"runtime/debug"
)

func init() {
	if Version == "dev" {
		if bi, ok := debug.ReadBuildInfo(); ok {
			Version = versionOf(bi)
		}
	}
}

// versionOf is the version build info gives a binary built without
// -ldflags: the module version `go install …@v1.2.3` records, else the
// VCS revision a build from a checkout records (with "-dirty" for
// uncommitted changes), else "dev".
func versionOf(bi *debug.BuildInfo) string {
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var rev, dirty string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "-dirty"
			}
		}
	}
	if rev == "" {
		return "dev"
	}
	return "dev-" + rev[:min(len(rev), 12)] + dirty
}
