package mcphttp

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"

	"github.com/agentbox/agentbox/internal/apierr"
	"github.com/agentbox/agentbox/internal/httpserver"
	"github.com/agentbox/agentbox/internal/mcpserver"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
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
			body = mcpserver.LimitNesting(body) // arguments too deep for the SDK are a tool error (nesting.go)
			if fast != nil && fast.serve(w, r, body) {
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			r.ContentLength = int64(len(body))
		}
		pw := &protocolErrorWriter{ResponseWriter: w, body: body}
		next.ServeHTTP(pw, r)
		pw.finish()
	})
}

// protocolErrorWriter replaces an SDK error answer (status >= 400) with a fixed one. The
// status is held until the SDK's body shows what it is: a JSON-RPC error (the SDK's answer on
// protocol 2026-07-28, where SEP-2575 pairs codes with statuses: -32601 is 404; -32602, -32020
// and -32022 are 400) keeps its code and status and loses its message; plain text gets the
// JSON-RPC error writeRPCError derives from the request.
type protocolErrorWriter struct {
	http.ResponseWriter
	body        []byte // the request body, for the JSON-RPC id
	held        int    // the SDK's error status, until its body is seen (0: none)
	intercepted bool   // the answer is ours; the SDK's bytes are dropped
	wrote       bool
}

func (w *protocolErrorWriter) WriteHeader(status int) {
	if w.intercepted || w.held != 0 {
		return
	}
	if status < 400 {
		w.ResponseWriter.WriteHeader(status)
		return
	}
	h := w.ResponseWriter.Header()
	h.Del("Content-Length")
	h.Del("X-Content-Type-Options")
	switch status {
	case http.StatusUnauthorized, http.StatusForbidden:
		w.intercepted = true
		writeStatus(w.ResponseWriter, status, apierr.Auth())
	case http.StatusRequestEntityTooLarge:
		w.intercepted = true
		writeStatus(w.ResponseWriter, status, apierr.TooLarge("", "request_too_large", maxRequestBytes))
	case http.StatusUnsupportedMediaType:
		w.intercepted = true
		writeStatus(w.ResponseWriter, status, apierr.UnsupportedMediaType())
	default:
		w.held = status
	}
}

// finish answers a held status whose body never came.
func (w *protocolErrorWriter) finish() {
	if w.held != 0 && !w.intercepted {
		w.intercepted = true
		w.writeRPCError(w.held, nil)
	}
}

// writeRPCError is the JSON-RPC error for a request the SDK refused with status and sdkBody.
// The SDK's own JSON-RPC error keeps its code and status. For plain text: a refusal of
// plainRefusals gets its code and message; otherwise -32700 for a body that is not JSON,
// -32601 for a method the server does not have (HTTP 200: a JSON-RPC answer), -32600 for the
// rest. The message is fixed and the data is the server's own (mcpserver.ProtocolErrorData);
// only the request's id is returned.
func (w *protocolErrorWriter) writeRPCError(status int, sdkBody []byte) {
	var req struct {
		ID     json.RawMessage `json:"id"`
		Method *string         `json:"method"`
	}
	parseErr := json.Unmarshal(w.body, &req)
	code, message := int64(jsonrpc.CodeInvalidRequest), ""
	var sdk struct {
		Error *struct {
			Code int64 `json:"code"`
		} `json:"error"`
	}
	refusal := slices.IndexFunc(plainRefusals, func(r plainRefusal) bool { return bytes.HasPrefix(sdkBody, []byte(r.prefix)) })
	switch {
	case json.Unmarshal(sdkBody, &sdk) == nil && sdk.Error != nil:
		code = sdk.Error.Code
	case refusal >= 0:
		code, message = plainRefusals[refusal].code, plainRefusals[refusal].message
	case parseErr != nil:
		if len(w.body) > 0 && !json.Valid(w.body) { // a GET or DELETE has no body to be malformed
			code = jsonrpc.CodeParseError
		}
	case req.Method != nil && !knownMethod(*req.Method):
		code, status = jsonrpc.CodeMethodNotFound, http.StatusOK
	}
	id := json.RawMessage("null")
	if validID(req.ID) {
		id = req.ID
	}
	w.ResponseWriter.Header().Set("Content-Type", "application/json")
	w.ResponseWriter.WriteHeader(status)
	json.NewEncoder(w.ResponseWriter).Encode(map[string]any{ //nolint:errcheck
		"jsonrpc": "2.0", "id": id, "error": rpcError(code, message),
	})
}

// plainRefusals are the SDK's (v1.8) plain-text refusals a caller can act on, by prefix, each
// with its code and fixed message ("": the code's); any other text is -32600 "invalid request".
type plainRefusal struct {
	prefix  string
	code    int64
	message string
}

var plainRefusals = []plainRefusal{
	{"Bad Request: Unsupported protocol version", mcp.CodeUnsupportedProtocolVersion, ""},
	{"Accept must contain both", jsonrpc.CodeInvalidRequest, "invalid request: the Accept header must list both application/json and text/event-stream"},
	{"JSON-RPC batching is not supported", jsonrpc.CodeInvalidRequest, "invalid request: protocol version 2025-06-18 and later take one JSON-RPC message per request, not a batch"},
	{"POST requires a non-empty body", jsonrpc.CodeInvalidRequest, "invalid request: the request body is empty"},
	{"Method Not Allowed", jsonrpc.CodeInvalidRequest, "invalid request: /mcp takes POST only (the server is stateless: no GET stream, no session to DELETE)"},
}

// rpcError is the error member of a JSON-RPC answer with code: a fixed message (the code's
// when message is ""), and data only where the server has its own to give.
func rpcError(code int64, message string) map[string]any {
	if message == "" {
		message = mcpserver.ProtocolErrorMessage(code)
	}
	e := map[string]any{"code": code, "message": message}
	if data := mcpserver.ProtocolErrorData(code); data != nil {
		e["data"] = data
	}
	return e
}

func (w *protocolErrorWriter) Write(b []byte) (int, error) {
	if w.intercepted {
		return len(b), nil // the SDK's own text is dropped
	}
	if w.held != 0 {
		w.intercepted = true
		w.writeRPCError(w.held, b)
		return len(b), nil
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
			Code int64 `json:"code"`
		} `json:"error"`
		Result json.RawMessage `json:"result"`
	}
	if json.Unmarshal(b, &m) != nil || m.Error == nil || m.Result != nil {
		return nil, false
	}
	id := json.RawMessage("null")
	if validID(m.ID) {
		id = m.ID
	}
	out, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "error": rpcError(m.Error.Code, "")})
	if err != nil {
		return nil, false
	}
	return append(out, '\n'), true
}

func (w *protocolErrorWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok && !w.intercepted && w.held == 0 {
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
