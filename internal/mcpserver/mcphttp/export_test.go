package mcphttp

import "net/http"

// NewSDKOnly is New with every request served by the SDK, to compare with the fast path.
func NewSDKOnly(cfg Config) http.Handler {
	cfg.sdkOnly = true
	return New(cfg)
}

// FastPathShape reports whether the fast path takes a request of these headers and body
// (the tool name aside).
func FastPathShape(r *http.Request, body []byte) bool {
	f := &fastCalls{}
	_, _, _, ok := f.parse(r, body)
	return ok && f.eligibleHeaders(r)
}
