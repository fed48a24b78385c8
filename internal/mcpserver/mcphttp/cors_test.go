package mcphttp_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/testenv"
)

// tokens is a comma-separated header's values, lowercased.
func tokens(h http.Header, name string) []string {
	var out []string
	for _, v := range h.Values(name) {
		for _, tok := range strings.Split(v, ",") {
			if tok = strings.ToLower(strings.TrimSpace(tok)); tok != "" {
				out = append(out, tok)
			}
		}
	}
	return out
}

func corsHeaders(h http.Header) []string {
	var out []string
	for k := range h {
		if strings.HasPrefix(k, "Access-Control-") {
			out = append(out, k)
		}
	}
	return out
}

// A browser can use /mcp from an allowed Origin (--mcp-allowed-origin): its CORS preflight is
// answered 204 before authentication (a preflight carries no credentials) with the methods
// and request headers MCP clients send, and every answer to that Origin — success, 401 (also
// the refusal of a known key's deferred check, which rebuilds the answer's headers), a
// protocol error — lets the page read it and the headers a client needs. The Origin is echoed,
// never "*". A non-allowed Origin is still refused 403 without CORS headers, preflight or not,
// and a request without Origin gets none.
func TestMCPCORSForAllowedOrigins(t *testing.T) {
	t.Parallel()
	const origin = "http://localhost:6274"
	e := testenv.New(t, testenv.Options{MCPAllowedOrigins: []string{origin}})
	e.Box("alpha")
	a := e.NewAgent("alpha", "a", nil)
	revoked := e.NewAgent("alpha", "revoked", nil)

	preflight := map[string]string{"Origin": origin, "Access-Control-Request-Method": "POST",
		"Access-Control-Request-Headers": "authorization, content-type, mcp-protocol-version"}
	resp, body := mcpRequest(t, e, http.MethodOptions, preflight, "")
	if resp.StatusCode != http.StatusNoContent || body != "" {
		t.Fatalf("preflight: %d %q", resp.StatusCode, body)
	}
	h := resp.Header
	if h.Get("Access-Control-Allow-Origin") != origin || !slices.Contains(tokens(h, "Vary"), "origin") || h.Get("Access-Control-Max-Age") == "" {
		t.Errorf("preflight headers: %v", h)
	}
	if !slices.Contains(tokens(h, "Access-Control-Allow-Methods"), "post") {
		t.Errorf("preflight methods: %v", h.Values("Access-Control-Allow-Methods"))
	}
	for _, want := range []string{"authorization", "content-type", "accept", "mcp-protocol-version", "mcp-session-id",
		"last-event-id", "agentbox-session", "mcp-method", "mcp-name"} {
		if !slices.Contains(tokens(h, "Access-Control-Allow-Headers"), want) {
			t.Errorf("preflight does not allow the request header %s: %v", want, h.Values("Access-Control-Allow-Headers"))
		}
	}

	readable := func(what string, resp *http.Response, expose ...string) {
		t.Helper()
		h := resp.Header
		if h.Get("Access-Control-Allow-Origin") != origin || !slices.Contains(tokens(h, "Vary"), "origin") {
			t.Errorf("%s: %d without the allowed Origin's CORS headers: %v", what, resp.StatusCode, h)
		}
		for _, want := range append([]string{"mcp-session-id", "www-authenticate", "retry-after"}, expose...) {
			if !slices.Contains(tokens(h, "Access-Control-Expose-Headers"), want) {
				t.Errorf("%s: %s not exposed: %v", what, want, h.Values("Access-Control-Expose-Headers"))
			}
		}
	}
	auth := func(key string) map[string]string {
		return map[string]string{"Origin": origin, "Authorization": "Bearer " + key}
	}
	resp, body = mcpRequest(t, e, http.MethodPost, auth(a.Key), initialize)
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `"result":`) {
		t.Fatalf("initialize from the allowed Origin: %d %s", resp.StatusCode, body)
	}
	readable("initialize", resp)
	call := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"agent_prime","arguments":{"box_key":"alpha"}}}`
	resp, body = mcpRequest(t, e, http.MethodPost, map[string]string{"Origin": origin, "Authorization": "Bearer " + a.Key, "Mcp-Protocol-Version": "2025-06-18"}, call)
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `"result":`) {
		t.Fatalf("tools/call (the fast path) from the allowed Origin: %d %s", resp.StatusCode, body)
	}
	readable("tools/call", resp)
	resp, _ = mcpRequest(t, e, http.MethodPost, auth("abk_bad"), initialize)
	if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") == "" {
		t.Fatalf("bad key: %d %v", resp.StatusCode, resp.Header)
	}
	readable("bad key", resp)
	if resp, body := mcpRequest(t, e, http.MethodPost, auth(revoked.Key), initialize); resp.StatusCode != http.StatusOK {
		t.Fatalf("before the revocation: %d %s", resp.StatusCode, body)
	}
	e.Admin("POST", "/boxes/alpha/keys/"+revoked.KeyID+"/revoke", nil)
	resp, _ = mcpRequest(t, e, http.MethodPost, auth(revoked.Key), initialize) // refused by the deferred check
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("revoked known key: %d", resp.StatusCode)
	}
	readable("revoked known key", resp)
	resp, _ = mcpRequest(t, e, http.MethodGet, auth(a.Key), "")
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("GET: %d", resp.StatusCode)
	}
	readable("GET", resp)

	for name, c := range map[string]struct {
		method  string
		headers map[string]string
		status  int
	}{
		"preflight from another Origin": {http.MethodOptions, map[string]string{"Origin": "http://evil.example", "Access-Control-Request-Method": "POST"}, http.StatusForbidden},
		"POST from another Origin":      {http.MethodPost, map[string]string{"Origin": "http://evil.example", "Authorization": "Bearer " + a.Key}, http.StatusForbidden},
		"POST without Origin":           {http.MethodPost, map[string]string{"Authorization": "Bearer " + a.Key}, http.StatusOK},
		"OPTIONS without Origin":        {http.MethodOptions, map[string]string{"Access-Control-Request-Method": "POST"}, http.StatusUnauthorized},
	} {
		body := initialize
		if c.method == http.MethodOptions {
			body = ""
		}
		resp, raw := mcpRequest(t, e, c.method, c.headers, body)
		if resp.StatusCode != c.status || len(corsHeaders(resp.Header)) > 0 {
			t.Errorf("%s: %d %v %s, want %d without CORS headers", name, resp.StatusCode, corsHeaders(resp.Header), raw, c.status)
		}
	}
}
