package mcphttp_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	genmcp "github.com/agentbox/agentbox/gen/mcp"
	"github.com/agentbox/agentbox/internal/service"
	"github.com/agentbox/agentbox/internal/testenv"
)

// A result made of <, > and & characters reaches an MCP client within the tool's response
// ceiling, as over HTTP: encoding/json's \u003c-style escapes (six bytes a character, twice:
// structuredContent and the text mirror) made a 32 KiB checkpoint of them a 393 KB answer.
// On /mcp (the fast path, the SDK's path, protocol 2026-07-28) and over stdio the answer
// carries the characters themselves and is the same JSON.
func TestMCPAnswersCarryHTMLCharactersAsThemselves(t *testing.T) {
	t.Parallel()
	e := testenv.New(t)
	e.Box("alpha")
	a := e.NewAgent("alpha", "a", nil)
	a.Prime()
	value := strings.Repeat("<&>", (service.CheckpointMaxBytes-len(`{"x":""}`))/3)
	checkpoint := map[string]any{"x": value}
	a.MustCall("PUT", "/checkpoint", map[string]any{"expected_revision": "0", "checkpoint": checkpoint, "idempotency_key": "k"})
	tl, _ := genmcp.LookupTool("checkpoint_get")
	ceiling := int(mcpResponseFactor*float64(tl.ResultBudgetBytes)) + mcpResponseOverhead

	check := func(what string, answer []byte) {
		t.Helper()
		if len(answer) > ceiling {
			t.Errorf("%s: the answer is %d bytes, over the ceiling %d", what, len(answer), ceiling)
		}
		if bytes.Contains(answer, []byte(`\u003c`)) || bytes.Contains(answer, []byte(`\u0026`)) {
			t.Errorf("%s: the answer escapes <, > or &: %.200s", what, answer)
		}
		var m struct {
			Result struct {
				StructuredContent struct {
					Checkpoint map[string]any `json:"checkpoint"`
				} `json:"structuredContent"`
				Content []struct {
					Text string `json:"text"`
				} `json:"content"`
			} `json:"result"`
		}
		if err := json.Unmarshal(answer, &m); err != nil || m.Result.StructuredContent.Checkpoint["x"] != value || len(m.Result.Content) != 1 {
			t.Fatalf("%s: not the checkpoint (%v): %.300s", what, err, answer)
		}
		var mirror struct {
			Checkpoint map[string]any `json:"checkpoint"`
		}
		if err := json.Unmarshal([]byte(m.Result.Content[0].Text), &mirror); err != nil || mirror.Checkpoint["x"] != value {
			t.Errorf("%s: the text mirror is not the checkpoint (%v)", what, err)
		}
	}

	auth := "Bearer " + a.Key
	call := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"checkpoint_get","arguments":{"box_key":"alpha"}}}`
	status, answer := rawPost(t, e, map[string]string{"Authorization": auth, "Mcp-Protocol-Version": "2025-06-18"}, call)
	if status != http.StatusOK {
		t.Fatalf("fast path: %d %.300s", status, answer)
	}
	check("/mcp, the fast path", answer)
	// A _meta of the request's own (a progress token) leaves the call to the SDK.
	sdkCall := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"checkpoint_get","arguments":{"box_key":"alpha"},"_meta":{"progressToken":"p"}}}`
	_, answer = rawPost(t, e, map[string]string{"Authorization": auth, "Mcp-Protocol-Version": "2025-06-18"}, sdkCall)
	check("/mcp, the SDK's path", answer)
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}`
	v2026 := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"checkpoint_get","arguments":{"box_key":"alpha"},` + meta + `}}`
	_, answer = rawPost(t, e, map[string]string{"Authorization": auth, "Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "checkpoint_get"}, v2026)
	check("/mcp, protocol 2026-07-28", answer)

	// Over stdio, `agentbox mcp` for the same agent, on a session primed beforehand.
	a.WithSession("stdio-html").Prime()
	out, err := runStdioAs(t, e, a.Key, "stdio-html", strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		strings.Replace(call, `"id":1`, `"id":4`, 1),
	}, "\n")+"\n")
	if err != nil {
		t.Fatalf("RunStdio: %v", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if strings.HasPrefix(line, `{"jsonrpc":"2.0","id":4,`) {
			check("stdio", []byte(line))
			return
		}
	}
	t.Fatalf("no stdio answer to checkpoint_get:\n%.2000s", fmt.Sprint(out))
}
