package mcphttp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/testenv"
)

// deepSave is a tools/call checkpoint_save (id 7) whose checkpoint nests arrays n deep inside
// one object; the JSON-RPC message nests 4 levels more.
func deepSave(n int, key string) string {
	return `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"checkpoint_save","arguments":{"box_key":"alpha","expected_revision":"0","checkpoint":{"x":` +
		strings.Repeat("[", n) + strings.Repeat("]", n) + `},"idempotency_key":"` + key + `"}}}`
}

// deepSave2026 is deepSave as the Go client sends it in the 2026-07-28 protocol.
func deepSave2026(n int, key string) string {
	return strings.Replace(deepSave(n, key), `"params":{`, `"params":{"_meta":{"io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"},"io.modelcontextprotocol/protocolVersion":"2026-07-28"},`, 1)
}

// toolErrorOf reads an answer as a tool error of the request with id 7 ("" code: it is not one).
func toolErrorOf(raw []byte) map[string]any {
	var m rpcToolError
	if json.Unmarshal(raw, &m) != nil || string(m.ID) != "7" || !m.Result.IsError {
		return nil
	}
	return m.Result.StructuredContent.Error
}

// Arguments nested deeper than the SDK's decoder takes (go-sdk v1.8.0 refuses a message nested
// over 1,000 levels, encoding/json over 10,000) are an INVALID_ARGUMENT tool error of the call,
// with its id (SPEC §12) — the HTTP API's error for a body nested too deep — on every path of
// /mcp: the fast path (which used to accept what the SDK refuses), the SDK's, and the 2026-07-28
// protocol; not a JSON-RPC -32600/-32700 with id null. Nothing is written. At the SDK's bound a
// call is served on every path.
func TestMCPDeeplyNestedArgumentsAreAToolError(t *testing.T) {
	t.Parallel()
	e := testenv.New(t)
	e.Box("alpha")
	a := e.NewAgent("alpha", "a", nil)
	a.Prime()
	deepest := a.Call("PUT", "/checkpoint", `{"expected_revision":"0","checkpoint":{"x":`+strings.Repeat("[", 20000)+strings.Repeat("]", 20000)+`},"idempotency_key":"http"}`)
	httpErr, _ := deepest.JSON()["error"].(map[string]any)
	if deepest.Status != http.StatusBadRequest || httpErr["code"] != "INVALID_ARGUMENT" {
		t.Fatalf("the HTTP API: %d %s", deepest.Status, deepest.Raw)
	}
	key := func(k string) map[string]string {
		return map[string]string{"Authorization": "Bearer " + a.Key, "Mcp-Protocol-Version": k}
	}
	paths := []struct {
		name    string
		headers map[string]string
		body    func(n int, key string) string
	}{
		{"fast path", key("2025-06-18"), deepSave},
		{"SDK", map[string]string{"Authorization": "Bearer " + a.Key}, deepSave},
		{"2026-07-28", map[string]string{"Authorization": "Bearer " + a.Key, "Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "checkpoint_save"}, deepSave2026},
	}
	for _, p := range paths {
		for _, n := range []int{997, 9999, 20000} {
			status, raw := rawPost(t, e, p.headers, p.body(n, fmt.Sprintf("deep-%d", n)))
			got := toolErrorOf(raw)
			if status != http.StatusOK || got == nil || got["code"] != "INVALID_ARGUMENT" {
				t.Errorf("%s, %d deep: %d %.300s", p.name, n, status, raw)
				continue
			}
			for _, k := range []string{"code", "message", "field", "retryable"} {
				if got[k] != httpErr[k] {
					t.Errorf("%s, %d deep: %s %v, the HTTP API's %v", p.name, n, k, got[k], httpErr[k])
				}
			}
		}
	}
	var saved int
	if err := e.Store.Pool().QueryRow(context.Background(), `SELECT count(*) FROM checkpoints WHERE agent_id = $1`, a.ID).Scan(&saved); err != nil || saved != 0 {
		t.Fatalf("a refused save wrote: %d (%v)", saved, err)
	}
	for _, p := range paths { // 996 deep: the message nests exactly 1,000 levels
		status, raw := rawPost(t, e, p.headers, p.body(996, "at-the-bound"))
		if status != http.StatusOK || !strings.Contains(string(raw), `"result":`) || toolErrorOf(raw)["code"] == "INVALID_ARGUMENT" {
			t.Errorf("%s at the bound: %d %.300s", p.name, status, raw)
		}
	}
}

// The same over stdio (`agentbox mcp`): the call is answered with its id, as a tool error.
func TestStdioDeeplyNestedArgumentsAreAToolError(t *testing.T) {
	t.Parallel()
	e := testenv.New(t)
	e.Box("alpha")
	a := e.NewAgent("alpha", "a", nil)
	stdin, lines := startStdio(t, e, a.Key)
	exchange := func(msg string) []byte {
		t.Helper()
		if _, err := io.WriteString(stdin, msg+"\n"); err != nil {
			t.Fatal(err)
		}
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("agentbox mcp exited")
			}
			return []byte(l)
		case <-time.After(30 * time.Second):
			t.Fatal("no answer")
		}
		return nil
	}
	exchange(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	if _, err := io.WriteString(stdin, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n"); err != nil {
		t.Fatal(err)
	}
	exchange(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"agent_prime","arguments":{"box_key":"alpha"}}}`) // this process's session
	for _, n := range []int{997, 9999, 20000} {
		raw := exchange(deepSave(n, fmt.Sprintf("deep-%d", n)))
		if got := toolErrorOf(raw); got == nil || got["code"] != "INVALID_ARGUMENT" || got["message"] != "the input is not valid JSON: nesting too deep" {
			t.Errorf("%d deep over stdio: %.300s", n, raw)
		}
	}
	if raw := exchange(deepSave(996, "at-the-bound")); toolErrorOf(raw) != nil || !strings.Contains(string(raw), `"revision":"1"`) {
		t.Errorf("at the bound over stdio: %.300s", raw)
	}
}
