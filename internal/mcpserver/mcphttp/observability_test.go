package mcphttp_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/testenv"
)

// Tool calls over /mcp are counted in /metrics by operation, like HTTP requests.
func TestToolCallsAreInMetrics(t *testing.T) {
	t.Parallel()
	e := testenv.New(t)
	e.Box("alpha")
	a := e.NewAgent("alpha", "a", nil)
	cs := mcpSession(t, e, a.Key, "", nil)
	toolCall(t, cs, "agent_prime", map[string]any{"box_key": "alpha"}).must(t, "prime")
	if r := toolCall(t, cs, "checkpoint_save", map[string]any{"box_key": "alpha", "expected_revision": "7", "checkpoint": map[string]any{}, "idempotency_key": idem()}); r.code() != "REVISION_CONFLICT" {
		t.Fatalf("stale save: %v", r)
	}
	// Calls refused before they ran are counted too (outside probe: only calls that ran were):
	// arguments the input schema refuses, unknown fields, another box, and, under the
	// endpoint, a request whose key is refused.
	if r := toolCall(t, cs, "inbox_list", map[string]any{"box_key": "alpha", "filter": "bogus"}); r.code() != "INVALID_ARGUMENT" {
		t.Fatalf("bad filter: %v", r)
	}
	if r := toolCall(t, cs, "inbox_list", map[string]any{"box_key": "alpha", "zzz": 1}); r.code() != "INVALID_ARGUMENT" {
		t.Fatalf("unknown field: %v", r)
	}
	if r := toolCall(t, cs, "inbox_list", map[string]any{"box_key": "beta"}); r.code() != "AUTH_FAILED" {
		t.Fatalf("another box: %v", r)
	}
	if status, _ := rawPost(t, e, map[string]string{"Authorization": "Bearer not-a-key"}, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`); status != http.StatusUnauthorized {
		t.Fatalf("a bad key: %d", status)
	}
	m := string(e.Do("GET", "/metrics", "", nil, nil).Raw)
	for _, want := range []string{
		`agentbox_requests_total{operation="agent_prime",transport="mcp",status="200"} 1`,
		`agentbox_requests_total{operation="checkpoint_save",transport="mcp",status="409"} 1`,
		`agentbox_request_errors_total{operation="checkpoint_save",transport="mcp",code="REVISION_CONFLICT"} 1`,
		`agentbox_request_errors_total{operation="inbox_list",transport="mcp",code="INVALID_ARGUMENT"} 2`,
		`agentbox_request_errors_total{operation="inbox_list",transport="mcp",code="AUTH_FAILED"} 1`,
		`agentbox_requests_total{operation="mcp",transport="mcp",status="401"} 1`,
		`agentbox_request_errors_total{operation="mcp",transport="mcp",code="AUTH_FAILED"} 1`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}

// The Agentbox-Session header keeps its published bound on /mcp as on the HTTP API.
func TestOverlongSessionHeaderRejected(t *testing.T) {
	t.Parallel()
	e := testenv.New(t)
	e.Box("alpha")
	a := e.NewAgent("alpha", "a", nil)
	long := strings.Repeat("s", 129)
	status, body := rawPost(t, e, map[string]string{"Authorization": "Bearer " + a.Key, "Agentbox-Session": long},
		`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	if status != http.StatusBadRequest || !strings.Contains(string(body), "INVALID_ARGUMENT") || strings.Contains(string(body), long) {
		t.Fatalf("%d %s", status, body)
	}
	if r := a.WithSession(long).Call("GET", "/checkpoint", nil); r.Status != http.StatusBadRequest || r.ErrorField("field") != "Agentbox-Session" {
		t.Fatalf("HTTP: %d %s", r.Status, r.Raw)
	}
	if r := a.WithSession(strings.Repeat("s", 128)).Call("POST", "/prime", map[string]any{}); r.Status != http.StatusOK {
		t.Fatalf("128 characters are allowed: %d %s", r.Status, r.Raw)
	}
}
