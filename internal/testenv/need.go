package testenv

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// SkipsFileEnv names the file `make test` collects skips in, to list them after the run
// (go test shows a skip's reason only with -v).
const SkipsFileEnv = "AGENTBOX_TEST_SKIPS"

// InCI reports whether this is a CI run (CI=true, as CI systems set it): there every test
// must run, so a missing tool fails instead of skipping.
func InCI() bool {
	v := strings.ToLower(os.Getenv("CI"))
	return v != "" && v != "false" && v != "0"
}

// Need stops t when a tool it needs is missing (ok false): in CI the test fails, since a
// skipped test there would pass a pipeline that did not test; elsewhere it skips, saying
// what is missing and the command that installs it, and records the skip for make test's
// summary.
func Need(t testing.TB, ok bool, missing, install string) {
	t.Helper()
	if ok {
		return
	}
	msg := fmt.Sprintf("%s: %s (install: %s)", t.Name(), missing, install)
	if InCI() {
		t.Fatalf("CI=true and a test needs what is missing: %s", msg)
	}
	if path := os.Getenv(SkipsFileEnv); path != "" {
		if f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644); err == nil {
			fmt.Fprintln(f, msg)
			f.Close()
		}
	}
	t.Skip("SKIPPED " + msg)
}
