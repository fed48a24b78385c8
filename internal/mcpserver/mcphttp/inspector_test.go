package mcphttp_test

import (
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/testenv"
)

// inspectorDir is tests/mcp-inspector: the official MCP Inspector, pinned by its lock file
// and installed by `make test` before go test.
var inspectorDir = filepath.Join("..", "..", "..", "tests", "mcp-inspector")

// TestInspectorCLI runs the MCP Inspector's CLI the way users run it, one process per call,
// with the mcpServers configuration of docs/mcp-clients.md: over stdio (`agentbox mcp`, whose
// AGENTBOX_SESSION keeps the calls in one session) and over /mcp (Agentbox-Session header),
// it lists the tools, primes and sends. A bad key over /mcp is reported as AUTH_FAILED.
func TestInspectorCLI(t *testing.T) {
	t.Parallel()
	node, err := exec.LookPath("node")
	testenv.Need(t, err == nil, "Node.js is not installed", "apt-get install -y nodejs npm, then make test")
	cli := filepath.Join(inspectorDir, "node_modules", "@modelcontextprotocol", "inspector", "clients", "launcher", "build", "index.js")
	_, err = os.Stat(cli)
	testenv.Need(t, err == nil, "tests/mcp-inspector/node_modules is missing", "make inspector-deps (make test runs it)")
	cli, _ = filepath.Abs(cli)

	e := testenv.New(t)
	e.Box("demo")
	planner := e.NewAgent("demo", "planner", nil)
	coder := e.NewAgent("demo", "coder", map[string]any{"listed": true})
	bin := buildAgentbox(t)
	config := filepath.Join(t.TempDir(), "mcp.json")
	doc := strings.NewReplacer(
		`"command": "agentbox"`, `"command": `+string(mustJSON(t, bin)),
		"http://127.0.0.1:8080", e.URL,
		"abk_YOUR_KEY", planner.Key,
	).Replace(docConfig(t))
	if err := os.WriteFile(config, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	home := t.TempDir() // the Inspector's catalog and settings stay out of the real home
	inspector := func(args ...string) (string, error) {
		cmd := exec.Command(node, append([]string{cli, "--cli"}, args...)...)
		cmd.Dir = t.TempDir()
		cmd.Env = append(os.Environ(), "HOME="+home, "MCP_INSPECTOR_SECRET_STORE=memory", "AGENTBOX_SESSION=", "AGENTBOX_API_KEY=")
		out, err := cmd.Output()
		if ee, ok := err.(*exec.ExitError); ok {
			return string(out) + string(ee.Stderr), err
		}
		return string(out), err
	}
	call := func(server string, args ...string) map[string]any {
		t.Helper()
		out, err := inspector(append([]string{"--config", config, "--server", server}, args...)...)
		if err != nil {
			t.Fatalf("inspector --server %s %v: %v\n%s", server, args, err, out)
		}
		var res map[string]any
		if err := json.Unmarshal([]byte(out), &res); err != nil {
			t.Fatalf("inspector --server %s %v: not JSON: %v\n%s", server, args, err, out)
		}
		if res["isError"] == true {
			t.Fatalf("inspector --server %s %v: tool error\n%s", server, args, out)
		}
		return res
	}
	for i, server := range []string{"agentbox", "agentbox-http"} {
		tools := call(server, "--method", "tools/list")["tools"].([]any)
		names := map[string]bool{}
		for _, tool := range tools {
			names[tool.(map[string]any)["name"].(string)] = true
		}
		if !names["agent_prime"] || !names["message_send"] || !names["inbox_list"] {
			t.Fatalf("%s: tools/list lacks agent_prime, message_send or inbox_list: %v", server, names)
		}
		call(server, "--method", "tools/call", "--tool-name", "agent_prime", "--tool-arg", "box_key=demo")
		// A separate process: without the configured session this would be NOT_PRIMED.
		sent := call(server, "--method", "tools/call", "--tool-name", "message_send",
			"--tool-arg", "box_key=demo", "--tool-arg", "idempotency_key=inspector-"+server,
			"--tool-arg", `destination={"kind":"dm","recipient_agent_id":"`+coder.ID.String()+`"}`,
			"--tool-arg", "body_md=hello "+server)
		if s := sent["structuredContent"].(map[string]any)["status"]; s != "sent" {
			t.Fatalf("%s: message_send status %v", server, s)
		}
		coder.Prime()
		inbox := coder.MustCall("GET", "/inbox", nil)
		if n := len(inbox["items"].([]any)); n != i+1 {
			t.Fatalf("after %s: coder's inbox has %d items, want %d", server, n, i+1)
		}
	}

	// Without AGENTBOX_SESSION each stdio process is a session of its own (SPEC §3): the
	// primed session above is not this one's.
	out, _ := inspector("-e", "AGENTBOX_SERVER="+e.URL, "-e", "AGENTBOX_API_KEY="+planner.Key, bin, "mcp",
		"--method", "tools/call", "--tool-name", "inbox_list", "--tool-arg", "box_key=demo")
	if !strings.Contains(out, "NOT_PRIMED") {
		t.Fatalf("a stdio process without AGENTBOX_SESSION: want NOT_PRIMED, got\n%s", out)
	}

	// A bad key: 401 with WWW-Authenticate: Bearer, which the Inspector (with
	// --stored-auth-only: it has no other way to skip OAuth on a 401) reports as AUTH_FAILED.
	req, _ := http.NewRequest("POST", e.URL+"/mcp", strings.NewReader(`{}`))
	req.Header.Set("Authorization", "Bearer abk_wrong")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") {
		t.Fatalf("bad key on /mcp: status %d, WWW-Authenticate %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
	}
	out, err = inspector(e.URL+"/mcp", "--stored-auth-only", "--header", "Authorization: Bearer abk_wrong", "--method", "tools/list")
	if err == nil || !strings.Contains(out, "AUTH_FAILED") {
		t.Fatalf("inspector with a bad key: err %v, want a failure naming AUTH_FAILED:\n%s", err, out)
	}
}

// docConfig is the mcpServers block of docs/mcp-clients.md.
func docConfig(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "..", "docs", "mcp-clients.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)```json\n(\\{\n  \"mcpServers\".*?)```").FindSubmatch(raw)
	if m == nil {
		t.Fatal("docs/mcp-clients.md has no ```json block with mcpServers")
	}
	return string(m[1])
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
