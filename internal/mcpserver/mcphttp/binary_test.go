package mcphttp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os/exec"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/cli"
	"github.com/agentbox/agentbox/internal/testenv"
)

// The generated agent CLI, run as the real binary.
func TestAgentCLI(t *testing.T) {
	t.Parallel()
	bin := buildAgentbox(t)
	e := testenv.New(t)
	e.Box("alpha")
	a := e.NewAgent("alpha", "a", nil)
	box := []string{"AGENTBOX_BOX=alpha"}
	sessionOf := func(m map[string]any) string { return str(m["session"].(map[string]any)["session_id"]) }

	// Not primed yet: the error body on stdout, the class in the exit code (checked by runCLI).
	if r := runCLIEnv(t, bin, e, a, box, nil, "checkpoint", "get"); r.code() != "NOT_PRIMED" {
		t.Fatalf("checkpoint get before prime: %+v", r)
	}
	// AGENTBOX_SESSION names the session; without it the key's lane (as over HTTP).
	lane := sessionOf(runCLIEnv(t, bin, e, a, box, nil, "prime").must(t, "prime"))
	if http := sessionOf(a.Prime()); http != lane {
		t.Errorf("CLI key lane %s, HTTP %s", lane, http)
	}
	s1 := sessionOf(runCLIEnv(t, bin, e, a, append(box, "AGENTBOX_SESSION=cli-1"), nil, "prime").must(t, "prime cli-1"))
	if http := sessionOf(a.WithSession("cli-1").Prime()); http != s1 || s1 == lane {
		t.Errorf("AGENTBOX_SESSION: CLI %s, HTTP %s, lane %s", s1, http, lane)
	}

	// Flags for top-level scalars, --input for the rest, --box over AGENTBOX_BOX.
	saved := runCLI(t, bin, e, a, nil, "checkpoint", "save", "--box", "alpha", "--expected-revision", "0",
		"--idempotency-key", "cli-save-1", "--input", `{"checkpoint":{"step":1}}`).must(t, "checkpoint save")
	if saved["revision"] != "1" {
		t.Fatalf("checkpoint save: %v", saved)
	}
	// Input from stdin with "-".
	stdin := []byte(`{"box_key":"alpha","expected_revision":"1","checkpoint":{"step":2},"idempotency_key":"cli-save-2"}`)
	if r := runCLI(t, bin, e, a, stdin, "checkpoint", "save", "-").must(t, "checkpoint save -"); r["revision"] != "2" {
		t.Fatalf("checkpoint save from stdin: %v", r)
	}
	got := runCLIEnv(t, bin, e, a, box, nil, "checkpoint", "get").must(t, "checkpoint get")
	if got["checkpoint"].(map[string]any)["step"] != float64(2) {
		t.Fatalf("checkpoint get: %v", got)
	}
	// Arguments are checked locally exactly as over MCP: unknown fields, types, bad UTF-8.
	if r := runCLIEnv(t, bin, e, a, box, nil, "checkpoint", "get", "--input", `{"extra":1}`); r.code() != "INVALID_ARGUMENT" || str(r.Error["field"]) != "extra" {
		t.Errorf("unknown field: %+v", r)
	}
	if r := runCLIEnv(t, bin, e, a, box, []byte("{\"known_checkpoint_revision\":\"\xff\"}"), "prime", "-"); r.code() != "INVALID_ARGUMENT" {
		t.Errorf("invalid UTF-8: %+v", r)
	}
	// Another box fails closed (the server decides for a single key).
	if r := runCLI(t, bin, e, a, nil, "checkpoint", "get", "--box", "beta"); r.code() != "AUTH_FAILED" {
		t.Errorf("another box: %+v", r)
	}

	// The alias rooms_list works (as words or as its name) and gives the canonical answer.
	canonical := runCLIEnv(t, bin, e, a, box, nil, "room", "list")
	for _, args := range [][]string{{"rooms", "list"}, {"rooms_list"}} {
		if r := runCLIEnv(t, bin, e, a, box, nil, args...); !jsonEqual(r.OK, canonical.OK) || !jsonEqual(r.Error, canonical.Error) {
			t.Errorf("%v: %+v, want %+v", args, r, canonical)
		}
	}

	// The contract is printed from the registry.
	for flag, key := range map[string]string{"--input-schema": `"box_key"`, "--output-schema": `"revision"`} {
		out, code := runRaw(t, bin, e, nil, "checkpoint", "save", flag)
		if code != 0 || !json.Valid([]byte(out)) || !strings.Contains(out, key) {
			t.Errorf("%s: exit %d, %q", flag, code, out)
		}
	}
	// Command-line mistakes are usage errors (exit 2, nothing on stdout).
	for _, args := range [][]string{{"checkpoint", "save", "--no-such-flag"}, {"checkpoint", "save", "--expected-revision"}, {"no", "such", "command"}} {
		if out, code := runRaw(t, bin, e, nil, args...); code != cli.ExitUsage || out != "" {
			t.Errorf("%v: exit %d, stdout %q", args, code, out)
		}
	}
	if out, code := runRaw(t, bin, e, nil, "tools"); code != 0 || !strings.Contains(out, "checkpoint save") {
		t.Errorf("agentbox tools: exit %d %q", code, out)
	}
}

func runRaw(t *testing.T, bin string, e *testenv.Env, env []string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(baseEnv(e), env...)
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return stdout.String(), ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return stdout.String(), 0
}

// `agentbox mcp` over stdio with a router key in a credentials file serves router mode
// (the server's /me says so), and tool_execute reaches the tools through the HTTP API.
func TestStdioRouterKey(t *testing.T) {
	t.Parallel()
	bin := buildAgentbox(t)
	e := testenv.New(t)
	e.Box("alpha")
	a := e.NewAgent("alpha", "a", nil)
	k := e.Admin("POST", "/boxes/alpha/agents/a/keys", map[string]any{"router": true})
	router := *a
	router.Key = str(k["api_key"])
	cs := stdioSession(t, bin, e, &router, true)
	tools, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(tools.Tools) != 4 {
		t.Fatalf("stdio router tools/list has %d tools", len(tools.Tools))
	}
	toolCall(t, cs, "agent_prime", map[string]any{"box_key": "alpha"}).must(t, "prime")
	r := toolCall(t, cs, "tool_execute", map[string]any{"box_key": "alpha", "name": "checkpoint_get", "arguments": map[string]any{}}).must(t, "execute")
	if r["result"].(map[string]any)["revision"] != "0" {
		t.Fatalf("execute checkpoint_get: %v", r)
	}
	// A box the credentials file has no key for fails closed without a request.
	if r := toolCall(t, cs, "tool_execute", map[string]any{"box_key": "alpha", "name": "checkpoint_get", "arguments": map[string]any{"box_key": "beta"}}); r.code() != "AUTH_FAILED" {
		t.Fatalf("execute in another box: %+v", r)
	}
	// The single-key process serves the full list.
	full, err := stdioSession(t, bin, e, a, false).ListTools(context.Background(), nil)
	if err != nil || len(full.Tools) <= 4 {
		t.Fatalf("stdio full list: %v", err)
	}
}
