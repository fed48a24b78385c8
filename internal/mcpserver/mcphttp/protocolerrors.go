package mcphttp

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"

	"github.com/agentbox/agentbox/internal/apierr"
	"github.com/agentbox/agentbox/internal/httpserver"
	"github.com/agentbox/agentbox/internal/mcpserver"
)

// The SDK answers transport-level failures itself, in plain text that can quote the request
// (the unknown method's name, a JSON decoding error). SPEC §12/§13.2: protocol errors never
// echo caller-supplied values, an unknown method is JSON-RPC -32601 in a JSON response, and
// oversize and compressed bodies get the error body. withProtocolErrors buffers the request body (the SDK
// reads all of it anyway) and replaces every such answer with a fixed one; successful
// exchanges pass through untouched. A tools/call the fast path answers (fastpath.go) never
// reaches the SDK.
func withProtocolErrors(next http.Handler, fast *fastCalls) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body []byte
		if r.Body != nil && r.Method == http.MethodPost {
			if httpserver.EncodedBody(r) { // the SDK would answer a compressed body as a parse error
				httpserver.WriteError(w, apierr.UnsupportedContentEncoding())
				return
			}
			var err error
			body, err = io.ReadAll(io.LimitReader(r.Body, maxRequestBytes+1))
			if err != nil {
				writeStatus(w, http.StatusBadRequest, httpserver.UnreadableBody(err, "the request body could not be read"))
				return
			}
			if len(body) > maxRequestBytes {
				writeStatus(w, http.StatusRequestEntityTooLarge, apierr.TooLarge("", "request_too_large", maxRequestBytes))
				return
			}
			if fast != nil && fast.serve(w, r, body) {
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			r.ContentLength = int64(len(body))
		}
		pw := &protocolErrorWriter{ResponseWriter: w, body: body}
		next.ServeHTTP(pw, r)
	})
}

// protocolErrorWriter swallows an SDK error answer (status >= 400) and writes a fixed one.
type protocolErrorWriter struct {
	http.ResponseWriter
	body        []byte // the request body, for the JSON-RPC id
	intercepted bool
	wrote       bool
}

func (w *protocolErrorWriter) WriteHeader(status int) {
	if status < 400 || w.intercepted {
		w.ResponseWriter.WriteHeader(status)
		return
	}
	w.intercepted = true
	h := w.ResponseWriter.Header()
	h.Del("Content-Length")
	h.Del("X-Content-Type-Options")
	switch status {
	case http.StatusUnauthorized, http.StatusForbidden:
		writeStatus(w.ResponseWriter, status, apierr.Auth())
	case http.StatusRequestEntityTooLarge:
		writeStatus(w.ResponseWriter, status, apierr.TooLarge("", "request_too_large", maxRequestBytes))
	case http.StatusUnsupportedMediaType:
		writeStatus(w.ResponseWriter, status, apierr.UnsupportedMediaType())
	default:
		w.writeRPCError(status)
	}
}

// writeRPCError is the JSON-RPC error for a request the SDK refused: -32700 for a body that
// is not JSON, -32601 for a method the server does not have (HTTP 200: a JSON-RPC answer),
// -32600 otherwise (a GET or DELETE of /mcp too, with the SDK's 405). The message is fixed; only the request's own id is returned.
func (w *protocolErrorWriter) writeRPCError(status int) {
	var req struct {
		ID     json.RawMessage `json:"id"`
		Method *string         `json:"method"`
	}
	code := -32600
	if err := json.Unmarshal(w.body, &req); err != nil {
		if len(w.body) > 0 && !json.Valid(w.body) { // a GET or DELETE has no body to be malformed
			code = -32700
		}
	} else if req.Method != nil && !knownMethod(*req.Method) {
		code, status = -32601, http.StatusOK
	}
	id := json.RawMessage("null")
	if validID(req.ID) {
		id = req.ID
	}
	w.ResponseWriter.Header().Set("Content-Type", "application/json")
	w.ResponseWriter.WriteHeader(status)
	json.NewEncoder(w.ResponseWriter).Encode(map[string]any{ //nolint:errcheck
		"jsonrpc": "2.0", "id": id, "error": map[string]any{"code": code, "message": mcpserver.ProtocolErrorMessage(int64(code))},
	})
}

func (w *protocolErrorWriter) Write(b []byte) (int, error) {
	if w.intercepted {
		return len(b), nil // the SDK's own text is dropped
	}
	if !w.wrote {
		w.wrote = true
		if fixed, ok := fixedRPCError(b); ok {
			w.ResponseWriter.Header().Del("Content-Length")
			if _, err := w.ResponseWriter.Write(fixed); err != nil {
				return 0, err
			}
			return len(b), nil
		}
	}
	return w.ResponseWriter.Write(b)
}

// fixedRPCError rewrites a JSON-RPC error answer of the SDK (whose message can quote the
// request's params) to a fixed message for its code. Only small bodies that look like an
// error are parsed; tool results (isError ones included) are results, not JSON-RPC errors.
func fixedRPCError(b []byte) ([]byte, bool) {
	if len(b) > 8192 || !bytes.Contains(b, []byte(`"error":{"code":-32`)) {
		return nil, false
	}
	var m struct {
		ID    json.RawMessage `json:"id"`
		Error *struct {
			Code int `json:"code"`
		} `json:"error"`
		Result json.RawMessage `json:"result"`
	}
	if json.Unmarshal(b, &m) != nil || m.Error == nil || m.Result != nil {
		return nil, false
	}
	msg := mcpserver.ProtocolErrorMessage(int64(m.Error.Code))
	id := json.RawMessage("null")
	if validID(m.ID) {
		id = m.ID
	}
	out, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "error": map[string]any{"code": m.Error.Code, "message": msg}})
	if err != nil {
		return nil, false
	}
	return append(out, '\n'), true
}

func (w *protocolErrorWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok && !w.intercepted {
		f.Flush()
	}
}

// validID admits only a JSON-RPC id as the spec allows: a number or a short string.
func validID(id json.RawMessage) bool {
	if len(id) == 0 || len(id) > 128 {
		return false
	}
	var v any
	if json.Unmarshal(id, &v) != nil {
		return false
	}
	switch v.(type) {
	case float64, string:
		return true
	}
	return false
}

// knownMethod: the JSON-RPC methods the SDK's server handles (v1.8).
func knownMethod(m string) bool {
	switch m {
	case "initialize", "ping", "tools/list", "tools/call", "prompts/list", "prompts/get",
		"resources/list", "resources/read", "resources/templates/list", "resources/subscribe",
		"resources/unsubscribe", "logging/setLevel", "completion/complete", "server/discover",
		"server/info", "subscriptions/listen":
		return true
	}
	return strings.HasPrefix(m, "notifications/")
}
