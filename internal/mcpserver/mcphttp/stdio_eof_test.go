package mcphttp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/mcpserver"
	"github.com/agentbox/agentbox/internal/testenv"
)

// A client that writes its whole exchange and closes stdin at once
// (printf '%s\n' "$INIT" "$INITIALIZED" "$TOOLS_LIST" … | agentbox mcp) gets an answer to
// every request read before EOF, forwarded tool calls included, and RunStdio then returns
// nil. Before the fix the SDK refused every reply written after the read EOF and cancelled
// the calls in flight: most runs lost the tool calls' answers, some lost all of them.
func TestStdioAnswersEveryRequestReadBeforeEOF(t *testing.T) {
	t.Parallel()
	in := strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"agent_prime","arguments":{"box_key":"alpha"}}}`,
		`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"checkpoint_get","arguments":{"box_key":"alpha"}}}`,
		`{"jsonrpc":"2.0","id":5,"method":"ping"}`,
	}, "\n") + "\n"
	out, err := runStdioOnce(t, in)
	if err != nil {
		t.Errorf("RunStdio = %v, want nil after stdin EOF", err)
	}
	answers := map[float64]map[string]any{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var m map[string]any
		if line == "" || json.Unmarshal([]byte(line), &m) != nil {
			continue
		}
		if id, ok := m["id"].(float64); ok {
			answers[id] = m
		}
	}
	for id := 1.0; id <= 5; id++ {
		m, ok := answers[id]
		if !ok {
			t.Errorf("no answer to request %v; stdout:\n%s", id, out)
			continue
		}
		if m["error"] != nil {
			t.Errorf("request %v: JSON-RPC error %v", id, m["error"])
		}
	}
	if t.Failed() {
		return
	}
	if tools, _ := answers[2]["result"].(map[string]any)["tools"].([]any); len(tools) == 0 {
		t.Errorf("tools/list: %v", answers[2])
	}
	// Calls run concurrently, so checkpoint_get may run before agent_prime and answer
	// NOT_PRIMED: any answer of the server will do, but not the TEMPORARILY_UNAVAILABLE of
	// a forward cancelled by the end of input.
	for _, id := range []float64{3, 4} {
		res, _ := answers[id]["result"].(map[string]any)
		sc, _ := res["structuredContent"].(map[string]any)
		e, _ := sc["error"].(map[string]any)
		if sc == nil || (id == 3 && res["isError"] == true) || e["code"] == "TEMPORARILY_UNAVAILABLE" {
			t.Errorf("tools/call %v: want the server's answer, got %v", id, answers[id])
		}
	}
}

// A line that is not a JSON-RPC message is answered with a JSON-RPC error and a null id
// (-32700 for text that is not JSON, -32600 for JSON that is not a message) and the process
// goes on: the requests after it are answered. The SDK's reader used to end the connection
// at such a line, and `agentbox mcp` exited 1 with the parser's message on stderr.
func TestStdioAnswersABadLineAndGoesOn(t *testing.T) {
	t.Parallel()
	in := strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`ZZMARKERZZ not json`,
		`{"jsonrpc":"2.0","id":{"a":"ZZMARKERZZ"},"method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":7,"method":`,
		`[]`,
		``,
		`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":3,"method":"ping"}`,
	}, "\n") + "\n"
	out, err := runStdioOnce(t, in)
	if err != nil {
		t.Errorf("RunStdio = %v, want nil", err)
	}
	if strings.Contains(out, "ZZMARKERZZ") {
		t.Errorf("a refused line is echoed:\n%s", out)
	}
	var codes []float64
	answered := map[float64]bool{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var m struct {
			ID    any `json:"id"`
			Error *struct {
				Code float64 `json:"code"`
			} `json:"error"`
		}
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("stdout line %q: %v", line, err)
		}
		switch id := m.ID.(type) {
		case nil:
			if m.Error == nil {
				t.Errorf("a null-id line without an error: %s", line)
				continue
			}
			codes = append(codes, m.Error.Code)
		case float64:
			if m.Error != nil {
				t.Errorf("request %v: %s", id, line)
			}
			answered[id] = true
		}
	}
	if want := []float64{-32700, -32600, -32700, -32600}; fmt.Sprint(codes) != fmt.Sprint(want) {
		t.Errorf("errors for the bad lines: %v, want %v; stdout:\n%s", codes, want, out)
	}
	for _, id := range []float64{1, 2, 3} {
		if !answered[id] {
			t.Errorf("request %v after the bad lines was not answered; stdout:\n%s", id, out)
		}
	}
}

// A request before initialize is the caller's to fix: -32600 saying to initialize first, not
// the -32603 (internal error) the SDK's plain refusal would read as.
func TestStdioRequestBeforeInitializeIsAnInvalidRequest(t *testing.T) {
	t.Parallel()
	out, err := runStdioOnce(t, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`+"\n")
	if err != nil {
		t.Errorf("RunStdio = %v, want nil", err)
	}
	var m struct {
		ID    float64 `json:"id"`
		Error *struct {
			Code    float64 `json:"code"`
			Message string  `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(strings.TrimSpace(out)), &m); err != nil || m.ID != 1 || m.Error == nil ||
		m.Error.Code != -32600 || !strings.Contains(m.Error.Message, "initialize") {
		t.Errorf("tools/list before initialize: %s", out)
	}
}

// runStdioOnce runs `agentbox mcp` in process for an agent of box alpha, with in as its
// whole input, and returns what it wrote once RunStdio returned.
func runStdioOnce(t *testing.T, in string) (string, error) {
	t.Helper()
	e := testenv.New(t)
	e.Box("alpha")
	a := e.NewAgent("alpha", "a", nil)
	return runStdioAs(t, e, a.Key, mcpserver.NewSessionKey("stdio-test-"), in)
}

// runStdioAs is runStdioOnce for the agent of key in box alpha of e, on the given session.
func runStdioAs(t *testing.T, e *testenv.Env, key, session, in string) (string, error) {
	t.Helper()
	creds, err := mcpserver.CredentialsFromEnv(func(k string) string {
		if k == "AGENTBOX_API_KEY" {
			return key
		}
		return ""
	})
	if err != nil {
		t.Fatal(err)
	}
	var out lockedBuffer
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = mcpserver.RunStdio(ctx, mcpserver.StdioConfig{
		Server: e.URL, Credentials: creds, Session: session, Box: "alpha", Version: "test",
	}, io.NopCloser(strings.NewReader(in)), &out)
	return out.String(), err
}

// lockedBuffer is RunStdio's stdout: written by the SDK's goroutines, read by the test.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) Close() error { return nil }

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
