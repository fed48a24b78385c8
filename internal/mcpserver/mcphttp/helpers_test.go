package mcphttp_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbox/agentbox/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// headerTransport adds fixed headers to every request of an HTTP client.
type headerTransport struct {
	headers map[string]string
}

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h.headers {
		r.Header.Set(k, v)
	}
	return http.DefaultTransport.RoundTrip(r)
}

// mcpSession connects the official Go SDK client to e's /mcp with the bearer key (and
// extra headers) at the given protocol version ("" = the SDK's newest).
func mcpSession(t *testing.T, e *testenv.Env, key, version string, headers map[string]string) *mcp.ClientSession {
	t.Helper()
	h := map[string]string{"Authorization": "Bearer " + key}
	for k, v := range headers {
		h[k] = v
	}
	transport := &mcp.StreamableClientTransport{Endpoint: e.URL + "/mcp", HTTPClient: &http.Client{Transport: headerTransport{h}}, MaxRetries: -1}
	c := mcp.NewClient(&mcp.Implementation{Name: "agentbox-test", Version: "1"}, nil)
	cs, err := c.Connect(context.Background(), transport, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("connect (version %q): %v", version, err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// result is one tool call's outcome as a test reads it.
type result struct {
	OK    map[string]any // structuredContent of a success
	Error map[string]any // structuredContent.error of an isError result
	Text  string         // the text mirror
}

func (r result) code() string   { return str(r.Error["code"]) }
func (r result) reason() string { return str(r.Error["reason"]) }

func str(v any) string { s, _ := v.(string); return s }

func toolCall(t *testing.T, cs *mcp.ClientSession, name string, args any) result {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("tools/call %s: %v", name, err)
	}
	return shape(t, name, res)
}

func shape(t *testing.T, name string, res *mcp.CallToolResult) result {
	t.Helper()
	var r result
	if len(res.Content) != 1 {
		t.Fatalf("%s: %d content blocks", name, len(res.Content))
	}
	tc, ok := res.Content[0].(*mcp.TextContent)
	if !ok {
		t.Fatalf("%s: content is %T", name, res.Content[0])
	}
	r.Text = tc.Text
	raw, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	if res.IsError {
		var sc struct {
			Error map[string]any `json:"error"`
		}
		if json.Unmarshal(raw, &sc) != nil || sc.Error == nil {
			t.Fatalf("%s: isError without structuredContent.error: %s", name, raw)
		}
		r.Error = sc.Error
		return r
	}
	if err := json.Unmarshal(raw, &r.OK); err != nil {
		t.Fatalf("%s: structuredContent %s: %v", name, raw, err)
	}
	var mirror map[string]any
	if err := json.Unmarshal([]byte(r.Text), &mirror); err != nil {
		t.Fatalf("%s: the text mirror is not the JSON result: %q", name, r.Text)
	}
	if !jsonEqual(mirror, r.OK) {
		t.Fatalf("%s: text mirror %s differs from structuredContent %s", name, r.Text, raw)
	}
	return r
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

// must fails unless r is a success.
func (r result) must(t *testing.T, what string) map[string]any {
	t.Helper()
	if r.Error != nil {
		t.Fatalf("%s: %v", what, r.Error)
	}
	return r.OK
}

// rawPost sends one JSON-RPC body to /mcp and returns the status and body.
func rawPost(t *testing.T, e *testenv.Env, headers map[string]string, body string) (int, []byte) {
	t.Helper()
	resp, raw := mcpRequest(t, e, "POST", headers, body)
	return resp.StatusCode, []byte(raw)
}

// mcpRequest sends one request to /mcp (a body as JSON, accepting JSON and event streams)
// and returns the response with its body read.
func mcpRequest(t *testing.T, e *testenv.Env, method string, headers map[string]string, body string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, e.URL+"/mcp", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp, string(raw)
}

var keySeq atomic.Int64

// idem is a fresh idempotency key.
func idem() string { return fmt.Sprintf("k-%d-%s", keySeq.Add(1), uuid.NewString()[:8]) }

// buildAgentbox builds the real binary into dir (once per calling test).
func buildAgentbox(t *testing.T) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	bin := filepath.Join(t.TempDir(), "agentbox")
	out, err := exec.Command(goBin, "build", "-o", bin, "github.com/agentbox/agentbox/cmd/agentbox").CombinedOutput()
	if err != nil {
		t.Fatalf("go build ./cmd/agentbox: %v\n%s", err, out)
	}
	return bin
}

// startStdio starts `agentbox mcp` for key against e (box alpha) and returns its standard
// input and its output lines; the process ends with the test.
func startStdio(t *testing.T, e *testenv.Env, key string) (io.WriteCloser, <-chan string) {
	t.Helper()
	cmd := exec.Command(buildAgentbox(t), "mcp")
	cmd.Env = append(baseEnv(e), "AGENTBOX_API_KEY="+key, "AGENTBOX_BOX=alpha")
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdin.Close(); cmd.Wait() }) //nolint:errcheck
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	return stdin, lines
}
