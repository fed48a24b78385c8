package testenv_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/testenv"
)

// TestMakeTestInCIWithoutChromium: under CI=true, `make test` with Chromium not on PATH
// fails before any test runs, naming what is missing and how to install it.
func TestMakeTestInCIWithoutChromium(t *testing.T) {
	t.Parallel()
	makeBin, err := exec.LookPath("make")
	if err != nil {
		t.Fatal("make is not installed")
	}
	// A PATH with Node.js and npm but no browser.
	bin := t.TempDir()
	for _, tool := range []string{"node", "npm"} {
		if p, err := exec.LookPath(tool); err == nil {
			if err := os.Symlink(p, filepath.Join(bin, tool)); err != nil {
				t.Fatal(err)
			}
		}
	}
	cmd := exec.Command(makeBin, "-C", filepath.Join("..", ".."), "--no-print-directory", "test")
	cmd.Env = append(os.Environ(), "PATH="+bin, "CI=true")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("make test succeeded without Chromium under CI=true:\n%s", out)
	}
	for _, want := range []string{"CI=true, and the tests need what is not on PATH: chromium", "install: apt-get install -y chromium"} {
		if !strings.Contains(string(out), want) {
			t.Fatalf("make test output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(string(out), "go test") || strings.Contains(string(out), "npm ci") {
		t.Fatalf("make test went on past the missing browser:\n%s", out)
	}
}

// TestNeedRecordsSkip: outside CI a missing tool skips the test and records it, with the
// install command, for make test's summary.
func TestNeedRecordsSkip(t *testing.T) {
	file := filepath.Join(t.TempDir(), "skips")
	t.Setenv("CI", "")
	t.Setenv(testenv.SkipsFileEnv, file)
	t.Run("needs-a-tool", func(t *testing.T) {
		testenv.Need(t, false, "the tool is not installed", "apt-get install -y tool")
		t.Fatal("Need returned for a missing tool")
	})
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if want := "TestNeedRecordsSkip/needs-a-tool: the tool is not installed (install: apt-get install -y tool)\n"; string(b) != want {
		t.Fatalf("skips file %q, want %q", b, want)
	}
}
