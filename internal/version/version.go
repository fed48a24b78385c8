// Package version names this build of agentbox: the module version of a tagged
// `go install`, else the revision `make build` stamps (git describe), else the VCS revision
// Go recorded in the build information.
package version

import (
	"runtime/debug"
	"sync"
)

// stamp is set by `make build`: -ldflags "-X …/internal/version.stamp=$(git describe)".
var stamp string

// String is e.g. "v1.2.0", "devel+3f2a9c1b7d4e" or "devel+3f2a9c1b7d4e-dirty"; "devel" when
// the build carries no information (go run, tests).
var String = sync.OnceValue(func() string {
	info, ok := debug.ReadBuildInfo()
	if ok && info.Main.Version != "" && info.Main.Version != "(devel)" {
		return info.Main.Version
	}
	if stamp != "" {
		return stamp
	}
	if !ok {
		return "devel"
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
