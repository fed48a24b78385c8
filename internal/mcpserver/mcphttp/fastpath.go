package mcphttp

import (
	"bytes"
	"encoding/json"
	"mime"
	"net/http"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbox/agentbox/internal/auth"
	"github.com/agentbox/agentbox/internal/mcpserver"
)

// Why /mcp answers most tools/call POSTs itself.
//
// The SDK's stateless streamable handler builds a whole server session for every POST: it
// connects a transport, synthesizes the initialize state, runs the JSON-RPC connection's
// goroutines and decodes the message several times with a streaming decoder that
// allocates a 32 KiB buffer each time (github.com/segmentio/encoding/json.(*Decoder).
// readValue was 68% of the bytes allocated by a checkpoint_get over /mcp). That machinery
// is what a stateful session needs; a stateless tools/call answered with one JSON body
// needs none of it, and it made MCP cost 1.4–1.7× plain HTTP per call on this server.
//
// So the SDK keeps serving the protocol (initialize and version negotiation, tools/list,
// ping, notifications, batches, every error, the 2026-07-28 protocol and anything else),
// and one shape of request is answered here: a single JSON-RPC tools/call POST, in a
// protocol version the SDK accepts below 2026-07-28 (stated in Mcp-Protocol-Version, as
// every client does after initialize), whose params are just name and arguments, naming a
// tool served in the key's mode. It runs the very handler the SDK would run
// (mcpserver.Calls: same authentication, argument checks, Backend dispatch, metrics,
// structuredContent + text mirror, isError results) and writes the response the SDK would
// write, encoded by the SDK's own jsonrpc.EncodeMessage with the SDK's headers;
// TestFastPathAnswersAsTheSDK compares the two byte for byte. Any other request, and any
// request this parser is unsure of, goes to the SDK untouched.
//
// Upstream, the fix is for StreamableHTTPHandler in stateless JSONResponse mode to
// dispatch a single request without a session or goroutines and to decode with
// encoding/json (or a pooled decoder) instead of a new segmentio streaming decoder per
// message; with that in the SDK this file can go.

// fastCalls holds the tools/call surface of both modes.
type fastCalls struct {
	full, router *mcpserver.Calls
}

// fastEnvelope is the one request shape answered here: these keys and no others.
type fastEnvelope struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      any             `json:"id"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params"`
}

type fastParams struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

// serve answers r (an authenticated POST whose body is body) and reports true, or reports
// false without writing anything: the request is the SDK's.
func (f *fastCalls) serve(w http.ResponseWriter, r *http.Request, body []byte) bool {
	if !f.eligibleHeaders(r) {
		return false
	}
	req, id, ok := f.parse(r, body)
	if !ok {
		return false
	}
	p, _ := auth.PrincipalFrom(r.Context())
	calls := f.full
	if p.Router {
		calls = f.router
	}
	if !calls.Served(req.Params.Name) {
		return false
	}
	res, err := calls.Call(r.Context(), req)
	resp := &jsonrpc.Response{ID: id}
	if err == nil {
		resp.Result, err = json.Marshal(res)
	}
	if err != nil {
		// A result that is not JSON (never, for a service result): the SDK's -32603 with the
		// fixed message withProtocolErrors gives every JSON-RPC error.
		resp.Result = nil
		resp.Error = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: mcpserver.ProtocolErrorMessage(jsonrpc.CodeInternalError)}
	}
	data, err := jsonrpc.EncodeMessage(resp)
	if err != nil {
		return true // unreachable: the id and result are JSON; the client sees an empty 200
	}
	h := w.Header()
	h.Set("Cache-Control", "no-cache, no-transform")
	h.Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	w.Write(data) //nolint:errcheck // the client went away
	return true
}

// eligibleHeaders: the headers the SDK's stateless handler checks all pass, and the
// protocol version is one the SDK serves with the legacy (initialize-based) protocol.
func (f *fastCalls) eligibleHeaders(r *http.Request) bool {
	if r.Header.Get("Mcp-Session-Id") != "" {
		return false
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		return false
	}
	var jsonOK, streamOK bool
	for _, v := range r.Header.Values("Accept") {
		for _, tok := range strings.Split(v, ",") {
			base, _, _ := strings.Cut(tok, ";")
			switch strings.ToLower(strings.TrimSpace(base)) {
			case "application/json":
				jsonOK = true
			case "text/event-stream":
				streamOK = true
			}
		}
	}
	if !jsonOK || !streamOK {
		return false
	}
	v := r.Header.Values("Mcp-Protocol-Version")
	return len(v) == 1 && v[0] < "2026-07-28" && slices.Contains(supportedVersions, v[0])
}

var supportedVersions = mcp.SupportedProtocolVersions()

// parse reads the one request shape answered here.
func (f *fastCalls) parse(r *http.Request, body []byte) (*mcp.CallToolRequest, jsonrpc.ID, bool) {
	body = bytes.TrimLeft(body, " \t\r\n")
	if len(body) == 0 || body[0] != '{' {
		return nil, jsonrpc.ID{}, false // a batch, or not JSON: the SDK's
	}
	var keys map[string]json.RawMessage
	if json.Unmarshal(body, &keys) != nil || len(keys) != 4 {
		return nil, jsonrpc.ID{}, false
	}
	for k := range keys {
		switch k { // exactly these (encoding/json would also match "Method" to a field)
		case "jsonrpc", "id", "method", "params":
		default:
			return nil, jsonrpc.ID{}, false
		}
	}
	var env fastEnvelope
	if json.Unmarshal(body, &env) != nil || env.JSONRPC != "2.0" || env.Method != "tools/call" || keys["params"] == nil {
		return nil, jsonrpc.ID{}, false
	}
	var id jsonrpc.ID
	switch v := env.ID.(type) {
	case float64, string:
		var err error
		if id, err = jsonrpc.MakeID(v); err != nil {
			return nil, jsonrpc.ID{}, false
		}
	default:
		return nil, jsonrpc.ID{}, false // a notification or a malformed id
	}
	var pkeys map[string]json.RawMessage
	if json.Unmarshal(env.Params, &pkeys) != nil || pkeys == nil || pkeys["name"] == nil {
		return nil, jsonrpc.ID{}, false
	}
	for k := range pkeys {
		if k != "name" && k != "arguments" {
			return nil, jsonrpc.ID{}, false // _meta (progress, tasks) and the like: the SDK's
		}
	}
	var p fastParams
	if json.Unmarshal(env.Params, &p) != nil {
		return nil, jsonrpc.ID{}, false
	}
	return &mcp.CallToolRequest{
		Params: &mcp.CallToolParamsRaw{Name: p.Name, Arguments: p.Arguments},
		Extra:  &mcp.RequestExtra{TokenInfo: tokenInfo(r), Header: r.Header},
	}, id, true
}
