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
	"github.com/agentbox/agentbox/internal/schema"
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
// server/discover, ping, notifications, batches, every error and anything else), and one
// shape of request is answered here: a single JSON-RPC tools/call POST whose params are
// just name and arguments, naming a tool served in the key's mode, in either
//   - a protocol version the SDK accepts below 2026-07-28, stated in Mcp-Protocol-Version
//     (as every client does after initialize), with no _meta; or
//   - the 2026-07-28 protocol (SEP-2575, the Go SDK v1.8 client's default), exactly as the
//     Go client sends it: Mcp-Protocol-Version 2026-07-28, Mcp-Method tools/call, Mcp-Name
//     the tool's name, no Mcp-Param-* header, and a _meta of exactly the protocol version
//     (2026-07-28), clientInfo and clientCapabilities. A _meta with any other key (log
//     level, progress token), a missing key or a header that disagrees stays the SDK's.
//
// It runs the very handler the SDK would run (mcpserver.Calls: same authentication,
// argument checks, Backend dispatch, metrics, structuredContent + text mirror, isError
// results) and writes the response the SDK would write, encoded by the SDK's own
// jsonrpc.EncodeMessage with the SDK's headers. In the 2026-07-28 protocol the SDK's
// result differs in two ways, both reproduced here: ServerSession.handle puts the server's
// Implementation in the result's _meta ("io.modelcontextprotocol/serverInfo"), and the
// multi-round-trip middleware sets resultType "complete" (an unexported field, which
// CallToolResult.MarshalJSON writes last). TestFastPathAnswersAsTheSDK compares the two
// paths byte for byte at every version. Any other request, and any request this parser is
// unsure of, goes to the SDK untouched.
//
// Upstream, the fix is for StreamableHTTPHandler in stateless JSONResponse mode to
// dispatch a single request without a session or goroutines and to decode with
// encoding/json (or a pooled decoder) instead of a new segmentio streaming decoder per
// message; with that in the SDK this file can go.

// fastCalls holds the tools/call surface of both modes.
type fastCalls struct {
	full, router         *mcpserver.Calls
	fullMeta, routerMeta []byte // serverInfoMeta of each
}

func newFastCalls(full, router *mcpserver.Calls) *fastCalls {
	meta := func(c *mcpserver.Calls) []byte {
		b, err := json.Marshal(mcp.Meta{mcp.MetaKeyServerInfo: c.Implementation()})
		if err != nil {
			return nil // never (an Implementation is JSON); successResponse then leaves it to the SDK's encoding
		}
		return b
	}
	return &fastCalls{full: full, router: router, fullMeta: meta(full), routerMeta: meta(router)}
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
	req, id, v2026, ok := f.parse(r, body)
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
	var data []byte
	if err == nil {
		data = f.successResponse(id, res, v2026, calls)
	}
	if data == nil {
		data, err = sdkResponse(id, res, err, v2026, calls)
		if err != nil {
			return true // unreachable: the id and result are JSON; the client sees an empty 200
		}
	}
	h := w.Header()
	h.Set("Cache-Control", "no-cache, no-transform")
	h.Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	w.Write(data) //nolint:errcheck // the client went away
	return true
}

// successResponse is the SDK's response to a call whose result is a success as
// mcpserver's successResult builds it (structuredContent, and the same JSON as the text
// mirror), written in one pass over each copy of the body: the SDK's encoding
// (CallToolResult.MarshalJSON inside jsonrpc.EncodeMessage) re-validates and compacts the
// body at every level of nesting, 10% of the server's CPU for a checkpoint_get over /mcp.
// The bytes are the SDK's: json.Marshal escapes <, >, &, U+2028 and U+2029 in the text
// string and in structuredContent (json.HTMLEscape), EncodeMessage escapes nothing more (nor
// in the id), and the 2026-07-28 protocol adds the server's Implementation in _meta and
// resultType (see serve). Any other result (an error result, a _meta of its own) is nil: the
// SDK's encoding writes it. (The handler's htmlUnescaper then writes <, > and & as
// themselves, on this path and the SDK's alike.)
func (f *fastCalls) successResponse(id jsonrpc.ID, res *mcp.CallToolResult, v2026 bool, calls *mcpserver.Calls) []byte {
	if res.IsError || res.Meta != nil || len(res.Content) != 1 {
		return nil
	}
	text, ok := res.Content[0].(*mcp.TextContent)
	structured, isRaw := res.StructuredContent.(json.RawMessage)
	if !ok || !isRaw || text.Meta != nil || text.Annotations != nil || string(structured) != text.Text {
		return nil
	}
	var idJSON bytes.Buffer // as EncodeMessage writes it: nothing HTML-escaped
	enc := json.NewEncoder(&idJSON)
	enc.SetEscapeHTML(false)
	if enc.Encode(id.Raw()) != nil {
		return nil
	}
	textJSON, err := json.Marshal(text.Text)
	if err != nil {
		return nil
	}
	var b bytes.Buffer
	b.Grow(idJSON.Len() + len(textJSON) + len(structured) + 256)
	b.WriteString(`{"jsonrpc":"2.0","id":`)
	b.Write(bytes.TrimSuffix(idJSON.Bytes(), []byte("\n")))
	b.WriteString(`,"result":{`)
	if v2026 {
		meta := f.serverInfoMeta(calls)
		if meta == nil {
			return nil
		}
		b.WriteString(`"_meta":`)
		b.Write(meta)
		b.WriteByte(',')
	}
	b.WriteString(`"content":[{"type":"text","text":`)
	b.Write(textJSON)
	b.WriteString(`}],"structuredContent":`)
	json.HTMLEscape(&b, structured)
	if v2026 {
		b.WriteString(`,"resultType":"complete"`)
	}
	b.WriteString(`}}`)
	return b.Bytes()
}

// serverInfoMeta is the _meta ServerSession.handle gives every result in the 2026-07-28
// protocol (annotateServerInfo), encoded once per surface.
func (f *fastCalls) serverInfoMeta(calls *mcpserver.Calls) []byte {
	if calls == f.router {
		return f.routerMeta
	}
	return f.fullMeta
}

// sdkResponse encodes the response as the SDK does, for any result successResponse does not
// write.
func sdkResponse(id jsonrpc.ID, res *mcp.CallToolResult, err error, v2026 bool, calls *mcpserver.Calls) ([]byte, error) {
	resp := &jsonrpc.Response{ID: id}
	if err == nil {
		if v2026 {
			// What ServerSession.handle adds for the 2026-07-28 protocol: the server's
			// Implementation in _meta (annotateServerInfo), unless the result has one.
			if res.Meta == nil {
				res.Meta = mcp.Meta{}
			}
			if _, ok := res.Meta[mcp.MetaKeyServerInfo]; !ok {
				res.Meta[mcp.MetaKeyServerInfo] = calls.Implementation()
			}
		}
		resp.Result, err = json.Marshal(res)
		if err == nil && v2026 {
			// And the multi-round-trip middleware's resultType "complete", an unexported
			// field that CallToolResult.MarshalJSON writes after every other one (the
			// result has no inputRequests, which would follow it).
			resp.Result = append(bytes.TrimSuffix(resp.Result, []byte("}")), `,"resultType":"complete"}`...)
		}
	}
	if err != nil {
		// A result that is not JSON (never, for a service result): the SDK's -32603 with the
		// fixed message withProtocolErrors gives every JSON-RPC error.
		resp.Result = nil
		resp.Error = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: mcpserver.ProtocolErrorMessage(jsonrpc.CodeInternalError)}
	}
	return jsonrpc.EncodeMessage(resp)
}

// eligibleHeaders: the headers the SDK's stateless handler checks all pass, and the
// protocol version is one the SDK serves: a legacy (initialize-based) one, or 2026-07-28
// with the standard headers as the Go client sends them.
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
	if len(v) != 1 || !slices.Contains(supportedVersions, v[0]) {
		return false
	}
	if v[0] < version2026 {
		return true
	}
	// The 2026-07-28 protocol (SEP-2575): the standard headers the SDK checks against the
	// body (parse compares Mcp-Name with the tool's name), and no Mcp-Param-* header (no
	// tool here declares x-mcp-header).
	if v[0] != version2026 {
		return false
	}
	if m := r.Header.Values("Mcp-Method"); len(m) != 1 || m[0] != "tools/call" {
		return false
	}
	if n := r.Header.Values("Mcp-Name"); len(n) != 1 || n[0] == "" {
		return false
	}
	for k := range r.Header {
		if strings.HasPrefix(k, "Mcp-Param-") {
			return false
		}
	}
	return true
}

// version2026 is the protocol of per-request metadata (SEP-2575), the Go SDK client's
// default.
const version2026 = "2026-07-28"

var supportedVersions = mcp.SupportedProtocolVersions()

// parse reads the one request shape answered here.
func (f *fastCalls) parse(r *http.Request, body []byte) (req *mcp.CallToolRequest, id jsonrpc.ID, v2026 bool, ok bool) {
	req, id, v2026, ok = f.parseBody(r, body)
	if ok && v2026 != (r.Header.Get("Mcp-Protocol-Version") == version2026) {
		return nil, jsonrpc.ID{}, false, false // the header and _meta disagree: the SDK's error
	}
	if ok && v2026 && r.Header.Get("Mcp-Name") != req.Params.Name {
		return nil, jsonrpc.ID{}, false, false
	}
	return req, id, v2026, ok
}

func (f *fastCalls) parseBody(r *http.Request, body []byte) (*mcp.CallToolRequest, jsonrpc.ID, bool, bool) {
	// The members are found in one pass over the bytes, each exactly once and by its exact
	// key (encoding/json would also match "Method" to a field); only the id and the name are
	// decoded. (Decoding the body and its params into maps and then each member was 13% of
	// the server's CPU for a checkpoint_get over /mcp.) Anything unusual — a duplicate or
	// escaped key, an escaped "2.0", text DecodeStrict refuses — is the SDK's to judge.
	var version, rawID, method, params []byte
	if !schema.ObjectMembers(body, func(k, v []byte) bool {
		var slot *[]byte
		switch string(k) {
		case "jsonrpc":
			slot = &version
		case "id":
			slot = &rawID
		case "method":
			slot = &method
		case "params":
			slot = &params
		}
		return setOnce(slot, v)
	}) || string(version) != `"2.0"` || string(method) != `"tools/call"` || params == nil || rawID == nil {
		return nil, jsonrpc.ID{}, false, false // a batch, a notification, not JSON: the SDK's
	}
	var idValue any
	if json.Unmarshal(rawID, &idValue) != nil {
		return nil, jsonrpc.ID{}, false, false
	}
	var id jsonrpc.ID
	switch v := idValue.(type) {
	case float64, string:
		var err error
		if id, err = jsonrpc.MakeID(v); err != nil {
			return nil, jsonrpc.ID{}, false, false
		}
	default:
		return nil, jsonrpc.ID{}, false, false // a malformed id
	}
	var name, arguments, meta []byte
	if !schema.ObjectMembers(params, func(k, v []byte) bool {
		var slot *[]byte
		switch string(k) {
		case "name":
			slot = &name
		case "arguments":
			slot = &arguments
		case "_meta":
			slot = &meta
		}
		return setOnce(slot, v)
	}) || name == nil {
		return nil, jsonrpc.ID{}, false, false
	}
	v2026 := meta != nil
	if v2026 && !meta2026(meta) {
		return nil, jsonrpc.ID{}, false, false // progress, tasks and the like: the SDK's
	}
	var p fastParams
	if json.Unmarshal(name, &p.Name) != nil {
		return nil, jsonrpc.ID{}, false, false
	}
	if arguments != nil {
		p.Arguments = json.RawMessage(arguments)
	}
	return &mcp.CallToolRequest{
		Params: &mcp.CallToolParamsRaw{Name: p.Name, Arguments: p.Arguments},
		Extra:  &mcp.RequestExtra{TokenInfo: tokenInfo(r), Header: r.Header},
	}, id, v2026, true
}

// setOnce stores a member's value in its slot; false for a member without one (nil) or seen before.
func setOnce(slot *[]byte, v []byte) bool {
	if slot == nil || *slot != nil {
		return false
	}
	*slot = v
	return true
}

// meta2026 reports whether raw is the _meta the Go SDK client sends with every 2026-07-28
// request: exactly the protocol version, the client's Implementation and its capabilities,
// each of a shape the SDK's validateRequestMeta accepts. Anything else (a log level, a
// progress token, a missing or odd key) is the SDK's to judge.
func meta2026(raw []byte) bool {
	var version, info, caps []byte
	if !schema.ObjectMembers(raw, func(k, v []byte) bool {
		var slot *[]byte
		switch string(k) {
		case mcp.MetaKeyProtocolVersion:
			slot = &version
		case mcp.MetaKeyClientInfo:
			slot = &info
		case mcp.MetaKeyClientCapabilities:
			slot = &caps
		}
		return setOnce(slot, v)
	}) || string(version) != `"`+version2026+`"` || !isObject(info) || !isObject(caps) {
		return false
	}
	var impl struct {
		Name    string `json:"name"`
		Version string `json:"version"`
	}
	if json.Unmarshal(info, &impl) != nil || impl.Name == "" {
		return false
	}
	var capabilities struct {
		mcp.ClientCapabilities
		Roots *mcp.RootCapabilities `json:"roots,omitempty"`
	}
	return json.Unmarshal(caps, &capabilities) == nil
}

func isObject(raw json.RawMessage) bool {
	raw = bytes.TrimLeft(raw, " \t\r\n")
	return len(raw) > 0 && raw[0] == '{'
}
