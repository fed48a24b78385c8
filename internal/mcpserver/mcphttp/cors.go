package mcphttp

import "net/http"

// CORS for the Origins of the allow-list (Config.AllowedOrigins): a page served from one may
// call /mcp from the browser. Its requests carry Authorization and JSON, so the browser first
// sends a preflight (OPTIONS, without credentials), and reads no answer that does not name
// its Origin. Each allowed Origin is echoed, never "*", with Vary: Origin. No credentials mode
// is granted (no Access-Control-Allow-Credentials): the key travels in the Authorization
// header, never in a cookie. Any other present Origin is refused 403 before all of this.
const (
	// corsMethods: POST is what the stateless /mcp serves; GET and DELETE are the transport's
	// other methods, answered 405 (no stream, no session), which a client reads as such
	// (the TypeScript SDK does) rather than as the network error of a failed preflight.
	corsMethods = "POST, GET, DELETE"
	// corsRequestHeaders: what MCP clients send (the Go and TypeScript SDKs; Mcp-Method and
	// Mcp-Name are the 2026-07-28 protocol's standard headers, SEP-2243), and the session
	// header (SPEC §3). No tool declares x-mcp-header, so no Mcp-Param-* header is sent.
	corsRequestHeaders = "Authorization, Content-Type, Accept, Mcp-Protocol-Version, Mcp-Session-Id, Last-Event-ID, Mcp-Method, Mcp-Name, Agentbox-Session"
	// corsExposedHeaders: the answer's headers a client reads beyond the safelisted ones.
	corsExposedHeaders = "Mcp-Session-Id, WWW-Authenticate, Retry-After"
	corsMaxAge         = "7200" // seconds; Chromium's own cap
)

// isPreflight reports whether r is a CORS preflight request.
func isPreflight(r *http.Request) bool {
	return r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != ""
}

// writePreflight answers a preflight from the allowed origin.
func writePreflight(w http.ResponseWriter, origin string) {
	h := w.Header()
	h.Set("Access-Control-Allow-Origin", origin)
	h.Add("Vary", "Origin")
	h.Set("Access-Control-Allow-Methods", corsMethods)
	h.Set("Access-Control-Allow-Headers", corsRequestHeaders)
	h.Set("Access-Control-Max-Age", corsMaxAge)
	w.WriteHeader(http.StatusNoContent)
}

// corsWriter gives every answer to an allowed origin its CORS headers as the status goes out,
// whatever the answer (a refusal by a deferred key check replaces the headers written
// before it: httpserver.HoldForCheck).
type corsWriter struct {
	http.ResponseWriter
	origin string
	sent   bool
}

func (c *corsWriter) WriteHeader(status int) {
	if !c.sent {
		c.sent = true
		h := c.Header()
		h.Set("Access-Control-Allow-Origin", c.origin)
		h.Add("Vary", "Origin")
		h.Set("Access-Control-Expose-Headers", corsExposedHeaders)
	}
	c.ResponseWriter.WriteHeader(status)
}

func (c *corsWriter) Write(b []byte) (int, error) {
	if !c.sent {
		c.WriteHeader(http.StatusOK)
	}
	return c.ResponseWriter.Write(b)
}

func (c *corsWriter) Flush() {
	if !c.sent {
		c.WriteHeader(http.StatusOK)
	}
	if f, ok := c.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (c *corsWriter) Unwrap() http.ResponseWriter { return c.ResponseWriter }
