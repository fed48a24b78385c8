package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// Tests that run `agentbox` as a process (server lifecycle, pglocal ownership, the
// reliability suite) share one build per test process, removed when Main returns.

var (
	binaryOnce sync.Once
	binaryPath string
	binaryErr  error
)

// AgentboxBinary builds cmd/agentbox once per test process and returns its path.
func AgentboxBinary(t testing.TB) string {
	t.Helper()
	binaryOnce.Do(func() {
		dir, err := os.MkdirTemp("", "agentbox-bin-")
		if err != nil {
			binaryErr = err
			return
		}
		path := filepath.Join(dir, "agentbox")
		// By import path, so the build works from any package's directory.
		if out, err := exec.Command("go", "build", "-o", path, "github.com/agentbox/agentbox/cmd/agentbox").CombinedOutput(); err != nil {
			binaryErr = fmt.Errorf("go build: %v\n%s", err, out)
			return
		}
		binaryPath = path
	})
	if binaryErr != nil {
		t.Fatal(binaryErr)
	}
	return binaryPath
}

// removeBinary deletes the build of AgentboxBinary, if any.
func removeBinary() {
	binaryOnce.Do(func() {}) // orders this read after a build
	if binaryPath != "" {
		os.RemoveAll(filepath.Dir(binaryPath)) //nolint:errcheck // a temp dir
	}
}
