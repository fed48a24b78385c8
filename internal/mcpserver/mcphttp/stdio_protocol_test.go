package mcphttp_test

import (
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/testenv"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// `agentbox mcp` over stdio: protocol errors carry no caller-supplied value (an unknown tool,
// an unknown method, undecodable params), and a NUL in an argument is INVALID_ARGUMENT with
// its field (issue 11, findings 3 and 7).
func TestStdioProtocolErrorsDoNotEcho(t *testing.T) {
	t.Parallel()
	const marker = "MRKstdio9"
	e := testenv.New(t)
	e.Box("alpha")
	a := e.NewAgent("alpha", "a", nil)
	stdin, lines := startStdio(t, e, a.Key)
	send := func(msg string) {
		t.Helper()
		if _, err := io.WriteString(stdin, msg+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	answer := func(id float64) map[string]any {
		t.Helper()
		timeout := time.After(30 * time.Second)
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatal("agentbox mcp exited")
				}
				if strings.Contains(l, marker) {
					t.Errorf("stdio answer echoes the request: %s", l)
				}
				var m map[string]any
				if json.Unmarshal([]byte(l), &m) == nil && m["id"] == id {
					return m
				}
			case <-timeout:
				t.Fatalf("no answer to request %v", id)
			}
		}
	}
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	answer(1)
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	rpcCode := func(m map[string]any) any {
		e, _ := m["error"].(map[string]any)
		return e["code"]
	}
	send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"` + marker + `","arguments":{}}}`)
	if c := rpcCode(answer(2)); c != float64(-32602) {
		t.Errorf("unknown tool: code %v", c)
	}
	send(`{"jsonrpc":"2.0","id":3,"method":"` + marker + `/x","params":{}}`)
	if c := rpcCode(answer(3)); c != float64(-32601) {
		t.Errorf("unknown method: code %v", c)
	}
	send(`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":"` + marker + `"}`)
	if c := rpcCode(answer(4)); c == nil {
		t.Errorf("undecodable params: no JSON-RPC error")
	}
	// A version the server does not speak: -32022 with the versions it does (a client
	// negotiates from them), never the requested one.
	send(`{"jsonrpc":"2.0","id":6,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2099-12-31","io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}}}`)
	unsupported, _ := answer(6)["error"].(map[string]any)
	data, _ := unsupported["data"].(map[string]any)
	if supported, _ := data["supported"].([]any); unsupported["code"] != float64(-32022) || len(supported) != len(mcp.SupportedProtocolVersions()) || data["requested"] != nil {
		t.Errorf("unsupported protocol version: %v", unsupported)
	}
	send(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"agent_prime","arguments":{"box_key":"alpha","known_checkpoint_revision":"` + marker + `\u0000"}}}`)
	res, _ := answer(5)["result"].(map[string]any)
	sc, _ := res["structuredContent"].(map[string]any)
	if er, _ := sc["error"].(map[string]any); res["isError"] != true || er["code"] != "INVALID_ARGUMENT" || er["field"] != "known_checkpoint_revision" {
		t.Errorf("NUL argument over stdio: %v", res)
	}
}
