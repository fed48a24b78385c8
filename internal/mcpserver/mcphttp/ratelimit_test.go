package mcphttp_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/testenv"
)

// rpcToolError is a raw /mcp answer read as a tools/call result that is a tool error.
type rpcToolError struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  struct {
		IsError           bool `json:"isError"`
		StructuredContent struct {
			Error map[string]any `json:"error"`
		} `json:"structuredContent"`
	} `json:"result"`
}

// A rate-limited tools/call on /mcp is what it is over stdio (SPEC §12): a JSON-RPC result
// that is a tool error with the RATE_LIMITED object the HTTP API sends in its 429 (retryable,
// retry_after_seconds), never an HTTP 429 an MCP client reports as a transport failure. Only
// a tools/call that runs a tool takes a token: initialize, tools/list and ping are never
// refused (they read no box data; over stdio they never reach the server). The refused call
// writes nothing and is counted in /metrics under its operation with its code; the HTTP API
// still answers 429 with Retry-After.
func TestMCPRateLimitedCallIsAToolError(t *testing.T) {
	t.Parallel()
	e := testenv.New(t)
	e.Box("alpha")
	a := e.NewAgent("alpha", "a", nil)
	b := e.NewAgent("alpha", "b", nil)
	a.Prime()
	e.Admin("PATCH", "/boxes/alpha/settings", map[string]any{"settings": map[string]any{"rate_limit_per_second": 1, "rate_limit_burst": 1}})

	cs := mcpSession(t, e, a.Key, "", nil) // initialize, then tools/list and ping: none refused
	for range 3 {
		if _, err := cs.ListTools(context.Background(), nil); err != nil {
			t.Fatalf("tools/list under the rate limit: %v", err)
		}
		// (The 2026-07-28 protocol has no ping: sent as a 2025-11-25 client sends it.)
		if status, raw := rawPost(t, e, map[string]string{"Authorization": "Bearer " + a.Key, "Mcp-Protocol-Version": "2025-11-25"},
			`{"jsonrpc":"2.0","id":3,"method":"ping"}`); status != http.StatusOK || strings.TrimSpace(string(raw)) != `{"jsonrpc":"2.0","id":3,"result":{}}` {
			t.Fatalf("ping under the rate limit: %d %s", status, raw)
		}
	}
	send := func(key string) map[string]any {
		return map[string]any{"box_key": "alpha", "idempotency_key": key, "body_md": "hello",
			"destination": map[string]any{"kind": "dm", "recipient_agent_id": b.ID.String()}}
	}
	toolCall(t, cs, "message_send", send("first")).must(t, "the first send takes the only token")
	limited := toolCall(t, cs, "message_send", send("second"))
	retryAfter, _ := limited.Error["retry_after_seconds"].(float64)
	if limited.code() != "RATE_LIMITED" || limited.Error["retryable"] != true || retryAfter < 1 || !strings.HasPrefix(limited.Text, "RATE_LIMITED: ") {
		t.Fatalf("the second send: %+v", limited)
	}
	// A request the SDK serves (no Mcp-Protocol-Version header: not the fast path) answers the
	// same tool error, with the request's id.
	status, raw := rawPost(t, e, map[string]string{"Authorization": "Bearer " + a.Key},
		`{"jsonrpc":"2.0","id":"third","method":"tools/call","params":{"name":"message_send","arguments":`+string(mustJSON(t, send("third")))+`}}`)
	var sdk rpcToolError
	if err := json.Unmarshal(raw, &sdk); status != http.StatusOK || err != nil || string(sdk.ID) != `"third"` || !sdk.Result.IsError ||
		sdk.Result.StructuredContent.Error["code"] != "RATE_LIMITED" || sdk.Result.StructuredContent.Error["retryable"] != true {
		t.Fatalf("through the SDK: %d %s", status, raw)
	}
	if _, err := cs.ListTools(context.Background(), nil); err != nil {
		t.Fatalf("tools/list once the bucket is empty: %v", err)
	}
	// The error object is the HTTP API's (what stdio relays), retry_after_seconds aside.
	r := a.Call("GET", "/checkpoint", nil)
	if r.Status != http.StatusTooManyRequests || r.Header.Get("Retry-After") == "" || r.Code() != "RATE_LIMITED" {
		t.Fatalf("the HTTP API under the limit: %d %s", r.Status, r.Raw)
	}
	httpErr, _ := r.JSON()["error"].(map[string]any)
	for _, k := range []string{"code", "message", "retryable", "suggested_action"} {
		if limited.Error[k] != httpErr[k] {
			t.Errorf("%s: MCP %v, HTTP %v", k, limited.Error[k], httpErr[k])
		}
	}
	var messages int
	if err := e.Store.Pool().QueryRow(context.Background(), `SELECT count(*) FROM messages`).Scan(&messages); err != nil || messages != 1 {
		t.Fatalf("messages written: %d (%v), want the first send's only", messages, err)
	}
	m := string(e.Do("GET", "/metrics", "", nil, nil).Raw)
	for _, want := range []string{
		`agentbox_requests_total{operation="message_send",transport="mcp",status="200"} 1`,
		`agentbox_requests_total{operation="message_send",transport="mcp",status="429"} 2`,
		`agentbox_request_errors_total{operation="message_send",transport="mcp",code="RATE_LIMITED"} 2`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}

// A key a process knows (it has acted there before its box set a limit) takes its token in
// the tool call's transaction (auth.AgentKeyCall): refused there, the call is the same tool
// error, not an HTTP 429. Its protocol requests, answered without a transaction, take no
// token and are not refused.
func TestMCPRateLimitOfAKnownKeyIsAToolError(t *testing.T) {
	t.Parallel()
	e := testenv.New(t)
	e.Box("alpha")
	a := e.NewAgent("alpha", "a", nil)
	protocolProcess, httpProcess := testenv.Attach(t, e), testenv.Attach(t, e)
	headers := map[string]string{"Authorization": "Bearer " + a.Key, "Mcp-Protocol-Version": "2025-06-18"}
	prime := `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"agent_prime","arguments":{"box_key":"alpha"}}}`
	for _, p := range []*testenv.Env{e, protocolProcess} { // the key is known to both now
		if status, raw := rawPost(t, p, headers, prime); status != http.StatusOK || strings.Contains(string(raw), `"isError":true`) {
			t.Fatalf("before the limit: %d %s", status, raw)
		}
	}
	e.Admin("PATCH", "/boxes/alpha/settings", map[string]any{"settings": map[string]any{"rate_limit_per_second": 1, "rate_limit_burst": 1}})
	// A process the key is new to takes the only token.
	if r := a.On(httpProcess).Call("GET", "/me", nil); r.Status != http.StatusOK {
		t.Fatalf("the call that empties the bucket: %d %s", r.Status, r.Raw)
	}
	for _, body := range []string{initialize, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, `{"jsonrpc":"2.0","id":3,"method":"ping"}`} {
		if status, raw := rawPost(t, protocolProcess, headers, body); status != http.StatusOK || !strings.Contains(string(raw), `"result":`) {
			t.Fatalf("%.40s… with the bucket empty: %d %s", body, status, raw)
		}
	}
	status, raw := rawPost(t, e, headers, prime)
	var res rpcToolError
	if err := json.Unmarshal(raw, &res); status != http.StatusOK || err != nil || string(res.ID) != "5" || !res.Result.IsError ||
		res.Result.StructuredContent.Error["code"] != "RATE_LIMITED" || res.Result.StructuredContent.Error["retryable"] != true {
		t.Fatalf("a known key's refused call: %d %s", status, raw)
	}
}
