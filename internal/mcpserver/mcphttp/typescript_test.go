package mcphttp_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/agentbox/agentbox/internal/testenv"
)

// tsDir is tests/mcp-ts: the official TypeScript SDK clients (package-lock.json pins them).
var tsDir = filepath.Join("..", "..", "..", "tests", "mcp-ts")

// TestTypeScriptSDK drives /mcp with the official TypeScript SDK clients at every protocol
// version they speak (1.x: 2024-11-05 to 2025-11-25; 2.x: 2026-07-28). The packages come
// from `make test` (npm ci before go test): a test never reaches the network itself.
func TestTypeScriptSDK(t *testing.T) {
	t.Parallel()
	node, err := exec.LookPath("node")
	testenv.Need(t, err == nil, "Node.js is not installed", "apt-get install -y nodejs npm, then make test")
	_, err = os.Stat(filepath.Join(tsDir, "node_modules", "@modelcontextprotocol"))
	testenv.Need(t, err == nil, "tests/mcp-ts/node_modules is missing", "make mcp-ts-deps (make test runs it)")
	e := testenv.New(t)
	e.Box("alpha")
	a := e.NewAgent("alpha", "ts", nil)
	cmd := exec.Command(node, "run.mjs")
	cmd.Dir = tsDir
	cmd.Env = append(os.Environ(), "MCP_URL="+e.URL+"/mcp", "MCP_KEY="+a.Key, "BOX_KEY=alpha")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	seen := map[string]bool{}
	sc := bufio.NewScanner(&stdout)
	for sc.Scan() {
		var line struct {
			Version, SDK, Error string
			OK                  bool
			Tools               int
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Errorf("node: %s", sc.Text())
			continue
		}
		seen[line.Version] = true
		if line.OK {
			t.Logf("%s (%s): ok, %d tools", line.Version, line.SDK, line.Tools)
		} else {
			t.Errorf("%s (%s): %s", line.Version, line.SDK, line.Error)
		}
	}
	if runErr != nil && !t.Failed() {
		t.Errorf("node run.mjs: %v\n%s", runErr, stderr.String())
	}
	for _, v := range []string{"2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28"} {
		if !seen[v] {
			t.Errorf("protocol version %s was not driven by a TypeScript client", v)
		}
	}
}
