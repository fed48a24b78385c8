package mcphttp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	genmcp "github.com/agentbox/agentbox/gen/mcp"
	"github.com/agentbox/agentbox/internal/apierr"
	"github.com/agentbox/agentbox/internal/cli"
	"github.com/agentbox/agentbox/internal/testenv"
)

// surface is one way an agent reaches the product: raw HTTP, MCP over streamable HTTP, MCP
// over stdio (the real `agentbox mcp` binary) or the generated CLI (the real binary).
type surface interface {
	call(t *testing.T, who *testenv.Agent, tool string, args map[string]any) result
}

// TestScenario runs one flow on every surface: prime, create a room, join it, send with a
// mention and a request, the recipient lists its inbox, ACKs and responds to the request.
func TestScenario(t *testing.T) {
	t.Parallel()
	for name, mk := range everySurface(buildAgentbox(t)) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := testenv.New(t)
			e.Box("alpha")
			a := e.NewAgent("alpha", "ann", map[string]any{"listed": true})
			b := e.NewAgent("alpha", "bob", map[string]any{"listed": true})
			runScenario(t, mk(t, e), a, b)
		})
	}
}

// everySurface makes each surface for an environment; bin is the agentbox binary.
func everySurface(bin string) map[string]func(*testing.T, *testenv.Env) surface {
	return map[string]func(*testing.T, *testenv.Env) surface{
		"raw HTTP":            func(*testing.T, *testenv.Env) surface { return rawHTTP{} },
		"MCP streamable HTTP": func(t *testing.T, e *testenv.Env) surface { return &mcpHTTP{e: e} },
		"MCP stdio":           func(t *testing.T, e *testenv.Env) surface { return &mcpStdio{bin: bin, e: e} },
		"CLI":                 func(t *testing.T, e *testenv.Env) surface { return cliSurface{bin: bin, e: e} },
	}
}

// TestMalformedBoxKeyIsAuthFailed: a box_key that does not match its pattern is AUTH_FAILED
// like any other credential failure (SPEC §12), on every surface; with one API key, stdio
// leaves the box to the server, and its schema check must not answer INVALID_ARGUMENT first.
func TestMalformedBoxKeyIsAuthFailed(t *testing.T) {
	t.Parallel()
	for name, mk := range everySurface(buildAgentbox(t)) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := testenv.New(t)
			e.Box("alpha")
			a := e.NewAgent("alpha", "ann", nil)
			s := mk(t, e)
			s.call(t, a, "agent_prime", map[string]any{"box_key": "alpha"}).must(t, "agent_prime")
			for _, bad := range []string{"BAD!", "Alpha", "a", "-alpha"} {
				r := s.call(t, a, "checkpoint_get", map[string]any{"box_key": bad})
				if r.code() != "AUTH_FAILED" {
					t.Errorf("box_key %q: %v %v, want AUTH_FAILED", bad, r.Error, r.OK)
				}
				if len(bad) > 3 && strings.Contains(r.Text, bad) {
					t.Errorf("box_key %q is echoed: %s", bad, r.Text)
				}
			}
		})
	}
}

func runScenario(t *testing.T, s surface, a, b *testenv.Agent) {
	step := func(who *testenv.Agent, tool string, args map[string]any) map[string]any {
		t.Helper()
		args["box_key"] = "alpha"
		return s.call(t, who, tool, args).must(t, tool)
	}
	step(a, "agent_prime", map[string]any{})
	step(b, "agent_prime", map[string]any{})
	room := step(a, "room_create", map[string]any{"name": "launch", "invitee_agent_ids": []string{b.ID.String()}, "idempotency_key": idem()})
	roomID := str(room["room_id"])
	if roomID == "" {
		t.Fatalf("room_create: %v", room)
	}
	step(b, "room_join", map[string]any{"room_id": roomID, "idempotency_key": idem()})
	sent := step(a, "message_send", map[string]any{
		"destination":       map[string]any{"kind": "room", "room_id": roomID},
		"body_md":           "@bob please review the launch plan",
		"mention_agent_ids": []string{b.ID.String()},
		"request_agent_ids": []string{b.ID.String()},
		"idempotency_key":   idem(),
	})
	msgID := str(sent["message_id"])
	if sent["status"] != "sent" || msgID == "" || sent["request_count"] != float64(1) {
		t.Fatalf("message_send: %v", sent)
	}
	inbox := step(b, "inbox_list", map[string]any{})
	var seq string
	items, _ := inbox["items"].([]any)
	for _, it := range items {
		row := it.(map[string]any)
		if m, _ := row["message"].(map[string]any); str(m["message_id"]) == msgID {
			seq = str(row["inbox_seq"])
		}
	}
	if seq == "" {
		t.Fatalf("the request is not in bob's inbox: %v", inbox)
	}
	ack := step(b, "inbox_ack", map[string]any{"inbox_seqs": []string{seq}, "idempotency_key": idem()})
	if res, _ := ack["results"].([]any); len(res) != 1 || res[0].(map[string]any)["status"] != "acked" {
		t.Fatalf("inbox_ack: %v", ack)
	}
	resp := step(b, "request_respond", map[string]any{"request_message_id": msgID, "expected_revision": "1",
		"status": "accepted", "body_md": "on it", "idempotency_key": idem()})
	if req, _ := resp["request"].(map[string]any); req["status"] != "accepted" {
		t.Fatalf("request_respond: %v", resp)
	}
	if reply, _ := resp["reply"].(map[string]any); str(reply["message_id"]) == "" {
		t.Fatalf("request_respond has no reply: %v", resp)
	}
}

// rawHTTP calls the HTTP API directly, building each request from the operation's method,
// path, parameters and body fields.
type rawHTTP struct{}

func (rawHTTP) call(t *testing.T, who *testenv.Agent, tool string, args map[string]any) result {
	t.Helper()
	tl, ok := genmcp.LookupTool(tool)
	if !ok {
		t.Fatalf("no tool %s", tool)
	}
	op := genmcp.Operations[tl.OperationID]
	path := op.Path
	for _, p := range op.PathParams {
		path = strings.Replace(path, "{"+p+"}", url.PathEscape(str(args[p])), 1)
	}
	q := url.Values{}
	for _, p := range op.QueryParams {
		if v, ok := args[p]; ok {
			q.Set(p, str(v)) // the scenario passes scalar query parameters only
		}
	}
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var body any
	if op.HasBody {
		m := map[string]any{}
		for _, f := range op.BodyFields {
			if v, ok := args[f]; ok {
				m[f] = v
			}
		}
		body = m
	}
	headers := map[string]string{}
	if who.Session != "" {
		headers["Agentbox-Session"] = who.Session
	}
	r := who.Env.Do(op.Method, path, who.Key, body, headers)
	var out result
	if r.Status == 200 {
		out.OK = r.JSON()
	} else if out.Error, _ = r.JSON()["error"].(map[string]any); out.Error == nil {
		t.Fatalf("%s: status %d without an error body: %s", tool, r.Status, r.Raw)
	}
	return out
}

// mcpHTTP is the Go SDK client on /mcp, one connection per agent.
type mcpHTTP struct {
	e        *testenv.Env
	mu       sync.Mutex
	sessions map[string]*mcp.ClientSession
}

func (s *mcpHTTP) call(t *testing.T, who *testenv.Agent, tool string, args map[string]any) result {
	t.Helper()
	s.mu.Lock()
	if s.sessions == nil {
		s.sessions = map[string]*mcp.ClientSession{}
	}
	cs, ok := s.sessions[who.Key]
	if !ok {
		cs = mcpSession(t, s.e, who.Key, "", nil)
		s.sessions[who.Key] = cs
	}
	s.mu.Unlock()
	return toolCall(t, cs, tool, args)
}

// mcpStdio runs `agentbox mcp` per agent and connects the Go SDK's CommandTransport; one
// agent uses AGENTBOX_API_KEY, the other an AGENTBOX_CREDENTIALS file.
type mcpStdio struct {
	bin      string
	e        *testenv.Env
	mu       sync.Mutex
	sessions map[string]*mcp.ClientSession
}

func (s *mcpStdio) call(t *testing.T, who *testenv.Agent, tool string, args map[string]any) result {
	t.Helper()
	s.mu.Lock()
	if s.sessions == nil {
		s.sessions = map[string]*mcp.ClientSession{}
	}
	cs, ok := s.sessions[who.Key]
	if !ok {
		cs = stdioSession(t, s.bin, s.e, who, len(s.sessions)%2 == 1)
		s.sessions[who.Key] = cs
	}
	s.mu.Unlock()
	return toolCall(t, cs, tool, args)
}

// stdioSession starts `agentbox mcp` for who, with a credentials file or the single key.
func stdioSession(t *testing.T, bin string, e *testenv.Env, who *testenv.Agent, credentialsFile bool, extraEnv ...string) *mcp.ClientSession {
	t.Helper()
	cmd := exec.Command(bin, "mcp")
	cmd.Env = append(baseEnv(e), extraEnv...)
	if credentialsFile {
		path := filepath.Join(t.TempDir(), "credentials.json")
		raw, _ := json.Marshal(map[string]string{who.BoxKey: who.Key})
		if err := os.WriteFile(path, raw, 0o600); err != nil {
			t.Fatal(err)
		}
		cmd.Env = append(cmd.Env, "AGENTBOX_CREDENTIALS="+path)
	} else {
		cmd.Env = append(cmd.Env, "AGENTBOX_API_KEY="+who.Key)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	c := mcp.NewClient(&mcp.Implementation{Name: "agentbox-test", Version: "1"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("agentbox mcp: %v\n%s", err, stderr.String())
	}
	t.Cleanup(func() {
		cs.Close()
		if t.Failed() {
			t.Logf("agentbox mcp stderr:\n%s", stderr.String())
		}
	})
	return cs
}

// baseEnv is a minimal environment for the binary: the server and nothing of ours.
func baseEnv(e *testenv.Env) []string {
	env := []string{"AGENTBOX_SERVER=" + e.URL}
	for _, k := range []string{"PATH", "HOME", "TMPDIR"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return env
}

// cliSurface runs `agentbox <domain> <verb> --input '{...}'` for every call.
type cliSurface struct {
	bin string
	e   *testenv.Env
}

func (s cliSurface) call(t *testing.T, who *testenv.Agent, tool string, args map[string]any) result {
	t.Helper()
	tl, ok := genmcp.LookupTool(tool)
	if !ok {
		t.Fatalf("no tool %s", tool)
	}
	input, _ := json.Marshal(args)
	return runCLI(t, s.bin, s.e, who, nil, append(strings.Fields(tl.CLI), "--input", string(input))...)
}

// runCLI runs the binary and reads its stdout as a result; the exit code must be the one
// of the error class.
func runCLI(t *testing.T, bin string, e *testenv.Env, who *testenv.Agent, stdin []byte, args ...string) result {
	t.Helper()
	return runCLIEnv(t, bin, e, who, nil, stdin, args...)
}

// runCLIEnv is runCLI with extra environment variables.
func runCLIEnv(t *testing.T, bin string, e *testenv.Env, who *testenv.Agent, env []string, stdin []byte, args ...string) result {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(append(baseEnv(e), "AGENTBOX_API_KEY="+who.Key), env...)
	if who.Session != "" {
		cmd.Env = append(cmd.Env, "AGENTBOX_SESSION="+who.Session)
	}
	cmd.Stdin = bytes.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	var out result
	if code == 0 {
		if err := json.Unmarshal(stdout.Bytes(), &out.OK); err != nil {
			t.Fatalf("agentbox %v: stdout is not a JSON object: %q (stderr %q)", args, stdout.String(), stderr.String())
		}
		return out
	}
	var eb struct {
		Error map[string]any `json:"error"`
	}
	if json.Unmarshal(stdout.Bytes(), &eb) != nil || eb.Error == nil {
		t.Fatalf("agentbox %v: exit %d without an error body on stdout: %q (stderr %q)", args, code, stdout.String(), stderr.String())
	}
	if want := cli.ExitCode(apierr.Code(str(eb.Error["code"]))); code != want {
		t.Errorf("agentbox %v: exit %d for %s, want %d", args, code, eb.Error["code"], want)
	}
	if stderr.Len() == 0 {
		t.Errorf("agentbox %v: no diagnostic on stderr", args)
	}
	out.Error = eb.Error
	return out
}
