// Package version names this build of agentbox, from the Go build information: the module
// version for a tagged `go install`, else the VCS revision the binary was built from.
package version

import (
	"runtime/debug"
	"sync"
)

// String is e.g. "v1.2.0", "devel+3f2a9c1b7d4e" or "devel+3f2a9c1b7d4e-dirty"; "devel" when
// the build carries no information (go run, tests).
var String = sync.OnceValue(func() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "devel"
	}
	if v := info.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var rev string
	dirty := false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev == "" {
		return "devel"
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if dirty {
		rev += "-dirty"
	}
	return "devel+" + rev
})
