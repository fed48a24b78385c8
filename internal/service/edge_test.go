package service_test

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/gen/api"
	genmcp "github.com/agentbox/agentbox/gen/mcp"
	"github.com/agentbox/agentbox/internal/testenv"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Finding 4: a path box_key that does not match its pattern is the one AUTH_FAILED (401,
// the same body as a bogus key), never a retryable 503, and never reaches the database.
func TestMalformedBoxKeyIsAuthFailed(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "a")
	a := w.agents["a"]
	want := raw(t, w.e, "GET", "/api/v1/boxes/alpha/me", "abk_bogus", "", nil, nil)
	for _, box := range []string{"%00", "%FF", "%ED%A0%80", "al%00pha", "ALPHA", "a", "-alpha", strings.Repeat("a", 64)} {
		r := raw(t, w.e, "GET", "/api/v1/boxes/"+box+"/me", a.Key, "", nil, nil)
		if r.Status != http.StatusUnauthorized || !bytes.Equal(r.Raw, want.Raw) {
			t.Errorf("box_key %q: want the AUTH_FAILED body %s, got %d %s", box, want.Raw, r.Status, r.Raw)
		}
	}
}

// Finding 5: only the media types the contract declares for an operation's request body are
// accepted; anything else is 415 with the error body and writes nothing.
func TestUndeclaredMediaTypeIs415(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "a", "b")
	a, b := w.agents["a"], w.agents["b"]
	body := []byte(`{"destination":{"kind":"dm","recipient_agent_id":"` + b.ID.String() + `"},"body_md":"hi","idempotency_key":"k1"}`)
	declared := genmcp.Operations["message_send"].MediaTypes
	for _, ct := range []string{"multipart/form-data; boundary=x", "text/plain", "application/x-www-form-urlencoded", "application/json; charset=latin1", "garbage/;;"} {
		if mt, _, _ := strings.Cut(ct, ";"); slices.Contains(declared, mt) && mt != "application/json" {
			continue // declared by the contract (uploads): read by its own handler
		}
		rejects(t, w.e, ct, func() testenv.Response {
			return raw(t, w.e, "POST", "/api/v1/boxes/alpha/messages", a.Key, ct, body, nil)
		}, "INVALID_ARGUMENT", "unsupported_media_type", "")
		if r := raw(t, w.e, "POST", "/api/v1/boxes/alpha/messages", a.Key, ct, body, nil); r.Status != http.StatusUnsupportedMediaType {
			t.Fatalf("%s: want 415, got %d", ct, r.Status)
		}
	}
	// The declared type, with or without its charset, and a body-less call without a type.
	if r := raw(t, w.e, "POST", "/api/v1/boxes/alpha/messages", a.Key, "application/json; charset=UTF-8", body, nil); r.Status != http.StatusOK {
		t.Fatalf("declared JSON: %d %s", r.Status, r.Raw)
	}
	if r := raw(t, w.e, "POST", "/api/v1/boxes/alpha/prime", a.Key, "", nil, nil); r.Status != http.StatusOK {
		t.Fatalf("prime without a body: %d %s", r.Status, r.Raw)
	}
	// Media types are case-insensitive (RFC 9110 §8.3.1), on the operations that also take
	// uploads too.
	for i, ct := range []string{"application/JSON", "Application/Json; Charset=UTF-8"} {
		body := []byte(`{"destination":{"kind":"dm","recipient_agent_id":"` + b.ID.String() + `"},"body_md":"case ` + ct + `","idempotency_key":"case-` + strconv.Itoa(i) + `"}`)
		if r := raw(t, w.e, "POST", "/api/v1/boxes/alpha/messages", a.Key, ct, body, nil); r.Status != http.StatusOK {
			t.Errorf("message_send with %s: %d %s", ct, r.Status, r.Raw)
		}
		batch := []byte(`{"recipient_agent_ids":["` + b.ID.String() + `"],"body_md":"batch ` + ct + `","idempotency_key":"batch-` + strconv.Itoa(i) + `"}`)
		if r := raw(t, w.e, "POST", "/api/v1/boxes/alpha/messages/batch", a.Key, ct, batch, nil); r.Status != http.StatusOK {
			t.Errorf("message_send_batch with %s: %d %s", ct, r.Status, r.Raw)
		}
	}
}

// A compressed body is 415 unsupported_content_encoding with Accept-Encoding: identity,
// and writes nothing: read as sent it would be "malformed JSON", and its client would hunt for
// a syntax error that is not there. An explicit identity encoding is the plain body.
func TestEncodedBodyIs415(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "a", "b")
	a, b := w.agents["a"], w.agents["b"]
	body := []byte(`{"destination":{"kind":"dm","recipient_agent_id":"` + b.ID.String() + `"},"body_md":"hi","idempotency_key":"k1"}`)
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(body) //nolint:errcheck // a bytes.Buffer
	zw.Close()     //nolint:errcheck
	for _, enc := range []string{"gzip", "GZIP", "br", "identity, gzip", "deflate"} {
		r := rejects(t, w.e, enc, func() testenv.Response {
			return raw(t, w.e, "POST", "/api/v1/boxes/alpha/messages", a.Key, "application/json", gz.Bytes(), map[string]string{"Content-Encoding": enc})
		}, "INVALID_ARGUMENT", "unsupported_content_encoding", "")
		if r.Status != http.StatusUnsupportedMediaType || r.Header.Get("Accept-Encoding") != "identity" {
			t.Errorf("%s: want 415 with Accept-Encoding: identity, got %d %q", enc, r.Status, r.Header.Get("Accept-Encoding"))
		}
	}
	// Checked after the key, like every body error (SPEC §12: AUTH_FAILED first).
	if r := raw(t, w.e, "POST", "/api/v1/boxes/alpha/messages", "abk_bogus", "application/json", gz.Bytes(), map[string]string{"Content-Encoding": "gzip"}); r.Status != http.StatusUnauthorized {
		t.Errorf("bad key and gzip body: want 401, got %d %s", r.Status, r.Raw)
	}
	if r := raw(t, w.e, "POST", "/api/v1/boxes/alpha/messages", a.Key, "application/json", body, map[string]string{"Content-Encoding": "identity"}); r.Status != http.StatusOK {
		t.Fatalf("identity: %d %s", r.Status, r.Raw)
	}
	// /mcp: the same 415 and error body, not the SDK's parse error.
	var call bytes.Buffer
	zw = gzip.NewWriter(&call)
	zw.Write([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"checkpoint_get","arguments":{"box_key":"alpha"}}}`)) //nolint:errcheck
	zw.Close()                                                                                                                            //nolint:errcheck
	r := raw(t, w.e, "POST", "/mcp", a.Key, "application/json", call.Bytes(), map[string]string{"Content-Encoding": "gzip",
		"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-06-18"})
	if r.Status != http.StatusUnsupportedMediaType || r.ErrorField("reason") != "unsupported_content_encoding" || r.Header.Get("Accept-Encoding") != "identity" {
		t.Errorf("gzip /mcp body: want 415 unsupported_content_encoding, got %d %q %s", r.Status, r.Header.Get("Accept-Encoding"), r.Raw)
	}
}

// A missing or repeated query parameter is INVALID_ARGUMENT naming it (SPEC §12: every schema
// violation has a field), as a malformed one is; nothing is written.
func TestQueryParameterErrorsNameTheParameter(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "a")
	a := w.agents["a"]
	someID := "0190f5e4-0000-7000-8000-000000000001"
	for _, c := range []struct{ path, field string }{
		{"/requests", "direction"},
		{"/requests?status=pending", "direction"},
		{"/directory", "query"},
		{"/threads/" + someID + "/export", "format"},
		{"/requests?direction=incoming&direction=outgoing", "direction"},
		{"/requests?direction=sideways", "direction"},
		// An object parameter sent flat is refused, not skipped: the list would otherwise
		// run unfiltered and record receipts for rows the caller did not ask for.
		{"/inbox?filter=all&destination=room", "destination"},
		{"/inbox?destination=dm&destination[kind]=dm&destination[recipient_agent_id]=" + someID, "destination"},
		{"/conversation?destination=dm", "destination"},
	} {
		rejects(t, w.e, c.path, func() testenv.Response {
			return raw(t, w.e, "GET", "/api/v1/boxes/alpha"+c.path, a.Key, "", nil, nil)
		}, "INVALID_ARGUMENT", "", c.field)
	}
	// A query or path value outside its schema's length bounds is refused as the same field
	// of a tool's arguments is (the MCP input schema), before the service reads it: an empty
	// or over-long cursor is not a CURSOR_INVALID.
	long := strings.Repeat("A", 2049)
	for _, c := range []struct{ what, path, bearer, args, code, reason, field string }{
		{"empty cursor", "/api/v1/boxes/alpha/inbox?cursor=", a.Key, `{"box_key":"alpha","cursor":""}`, "INVALID_ARGUMENT", "", "cursor"},
		{"long cursor", "/api/v1/boxes/alpha/inbox?cursor=" + long, a.Key, `{"box_key":"alpha","cursor":"` + long + `"}`, "LIMIT_EXCEEDED", "cursor_too_large", "cursor"},
		{"empty search", "/api/v1/boxes/alpha/directory?query=", a.Key, "", "INVALID_ARGUMENT", "", "query"},
		{"long agent_ref", "/admin/api/v1/boxes/alpha/agents/" + strings.Repeat("a", 65) + "/keys", testenv.AdminToken, "", "LIMIT_EXCEEDED", "agent_ref_too_large", "agent_ref"},
		// A deepObject parameter is validated as the tool's argument is: its member named.
		{"bad destination kind", "/api/v1/boxes/alpha/inbox?destination[kind]=bogus", a.Key, `{"box_key":"alpha","destination":{"kind":"bogus"}}`, "INVALID_ARGUMENT", "", "destination.kind"},
		{"bad destination uuid", "/api/v1/boxes/alpha/inbox?destination[kind]=dm&destination[recipient_agent_id]=xyz", a.Key, `{"box_key":"alpha","destination":{"kind":"dm","recipient_agent_id":"xyz"}}`, "INVALID_ARGUMENT", "", "destination.recipient_agent_id"},
		{"unknown destination member", "/api/v1/boxes/alpha/inbox?destination[kind]=dm&destination[zz]=1", a.Key, `{"box_key":"alpha","destination":{"kind":"dm","zz":"1"}}`, "INVALID_ARGUMENT", "unknown_field", "destination.zz"},
		{"unknown destination member that is no name", "/api/v1/boxes/alpha/inbox?destination[kind]=dm&destination[%3Cx%3E]=1", a.Key, "", "INVALID_ARGUMENT", "unknown_field", "destination"},
		{"NUL in a destination member", "/api/v1/boxes/alpha/inbox?destination[kind]=dm&destination[room_id]=%00", a.Key, `{"box_key":"alpha","destination":{"kind":"dm","room_id":"\u0000"}}`, "INVALID_ARGUMENT", "invalid_text", "destination.room_id"},
	} {
		rejects(t, w.e, c.what, func() testenv.Response {
			return raw(t, w.e, "GET", c.path, c.bearer, "", nil, nil)
		}, c.code, c.reason, c.field)
		if c.args == "" {
			continue
		}
		isErr, content, rawResp := mcpToolCall(t, w.e, a.Key, "inbox_list", c.args)
		e, _ := content["error"].(map[string]any)
		if !isErr || e["code"] != c.code || e["field"] != c.field {
			t.Errorf("MCP %s: want %s field %s, got %s", c.what, c.code, c.field, rawResp)
		}
	}
}

// Finding 6: paths the mux would clean are 404 with the error body, never a redirect that
// echoes the request.
func TestUncleanPathsAre404WithoutRedirect(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "a")
	a := w.agents["a"]
	for _, p := range []string{"/api/v1/boxes/alpha/../alpha/me?x=" + marker, "/api/v1/boxes/alpha/./me?x=" + marker,
		"//api/v1/boxes/alpha/me?x=" + marker, "/api/v1//boxes/alpha/me", "/admin/api/v1/../v1/boxes?x=" + marker} {
		r := raw(t, w.e, "GET", p, a.Key, "", nil, nil)
		if r.Status != http.StatusNotFound || r.Code() != "NOT_FOUND_OR_FORBIDDEN" || bytes.Contains(r.Raw, []byte(marker)) {
			t.Errorf("%s: want 404 with the error body, got %d %s", p, r.Status, r.Raw)
		}
	}
}

// Oversize headers and bodies get the error body from this server, over HTTP and on /mcp.
func TestOversizeRequestsGetTheErrorBody(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "a")
	key := w.agents["a"].Key
	r := raw(t, w.e, "GET", "/api/v1/boxes/alpha/me", key, "", nil, map[string]string{"X-Big": strings.Repeat("y", 70<<10)})
	if r.Status != http.StatusRequestHeaderFieldsTooLarge || r.Code() != "LIMIT_EXCEEDED" || r.ErrorField("reason") != "headers_too_large" {
		t.Fatalf("want 431 LIMIT_EXCEEDED headers_too_large, got %d %s", r.Status, r.Raw)
	}
	// Any operation can answer it (a long query string counts), so every one documents it
	// (SPEC §13.3: every error response documented), for the SDKs generated from the contract.
	doc, err := api.GetSwagger()
	if err != nil {
		t.Fatal(err)
	}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			if op.Responses.Status(http.StatusRequestHeaderFieldsTooLarge) == nil {
				t.Errorf("%s %s does not document 431", method, path)
			}
		}
	}
	big := []byte(`{"checkpoint":{"x":"` + strings.Repeat(marker, (2<<20)/len(marker)) + `"}}`)
	r = raw(t, w.e, "PUT", "/api/v1/boxes/alpha/checkpoint", key, "application/json", big, nil)
	if r.Code() != "LIMIT_EXCEEDED" || r.ErrorField("reason") != "request_too_large" || bytes.Contains(r.Raw, []byte(marker)) {
		t.Fatalf("oversize HTTP body: %d %s", r.Status, r.Raw)
	}
	status, m, rawBody := mcpCall(t, w.e, key, append([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"checkpoint_get","arguments":{"box_key":"alpha","x":"`), append(bytes.Repeat([]byte(marker), (3<<20)/len(marker)), []byte(`"}}}`)...)...))
	e, _ := m["error"].(map[string]any)
	if status != http.StatusRequestEntityTooLarge || e["code"] != "LIMIT_EXCEEDED" || bytes.Contains(rawBody, []byte(marker)) {
		t.Fatalf("oversize MCP body: %d %.300s", status, rawBody)
	}
}

// Finding 7: MCP protocol errors carry no caller-supplied value; an unknown JSON-RPC method is
// -32601 in a JSON response; malformed JSON-RPC is -32700.
func TestMCPProtocolErrorsDoNotEcho(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "a")
	key := w.agents["a"].Key
	rpcError := func(what string, body string, code float64) {
		t.Helper()
		status, m, rawBody := mcpCall(t, w.e, key, []byte(body))
		e, _ := m["error"].(map[string]any)
		if e == nil || e["code"] != code {
			t.Errorf("%s: want JSON-RPC error %v, got %d %s", what, code, status, rawBody)
		}
		if bytes.Contains(rawBody, []byte(marker)) {
			t.Errorf("%s: echoes the request: %s", what, rawBody)
		}
	}
	rpcError("unknown tool", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"`+marker+`","arguments":{}}}`, -32602)
	rpcError("unknown method", `{"jsonrpc":"2.0","id":2,"method":"`+marker+`/go","params":{}}`, -32601)
	rpcError("malformed", `{"jsonrpc":"2.0","id":3,"method":"`+marker, -32700)
	rpcError("bad params", `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":"`+marker+`"}`, -32602)
	status, _, rawBody := mcpCall(t, w.e, key, []byte(`{"jsonrpc":"2.0","id":2,"method":"`+marker+`/go","params":{}}`))
	if status != http.StatusOK {
		t.Errorf("unknown method: want a JSON-RPC answer with 200, got %d %s", status, rawBody)
	}
	// GET and DELETE of /mcp (no body, no stream: the server is stateless) are refused as
	// invalid requests, not as malformed JSON.
	for _, method := range []string{"GET", "DELETE"} {
		r := raw(t, w.e, method, "/mcp", key, "", nil, map[string]string{"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-06-18"})
		var m map[string]any
		json.Unmarshal(r.Raw, &m) //nolint:errcheck
		if e, _ := m["error"].(map[string]any); r.Status != http.StatusMethodNotAllowed || e == nil || e["code"] != float64(-32600) {
			t.Errorf("%s /mcp: %d %s", method, r.Status, r.Raw)
		}
	}
}

// On protocol 2026-07-28 the SDK answers protocol failures with JSON-RPC errors whose codes and
// HTTP statuses SEP-2575 fixes (-32601 is 404; -32602, -32020 and -32022 are 400), and a client
// negotiates from -32022's data. The fixed-message rewrite keeps each code, status and the
// server's own data, and still echoes nothing: not the tool or method name, not a header, not
// the requested version.
func TestMCPProtocolErrorsKeepTheirCodes(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "a")
	key := w.agents["a"].Key
	const future = "2099-12-31"
	meta := func(version string) string {
		return `"_meta":{"io.modelcontextprotocol/protocolVersion":"` + version + `","io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}`
	}
	cases := []struct {
		what, version, method, name, body string
		status                            int
		code                              float64
	}{
		{"unknown tool", "2026-07-28", "tools/call", marker,
			`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"` + marker + `","arguments":{},` + meta("2026-07-28") + `}}`, 400, -32602},
		{"unknown method", "2026-07-28", marker + "/go", "",
			`{"jsonrpc":"2.0","id":2,"method":"` + marker + `/go","params":{` + meta("2026-07-28") + `}}`, 404, -32601},
		{"Mcp-Method header missing", "2026-07-28", "", "",
			`{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{` + meta("2026-07-28") + `}}`, 400, -32020},
		{"Mcp-Name header disagrees with the body", "2026-07-28", "tools/call", marker,
			`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"checkpoint_get","arguments":{},` + meta("2026-07-28") + `}}`, 400, -32020},
		{"unsupported version in _meta", future, "server/discover", "",
			`{"jsonrpc":"2.0","id":5,"method":"server/discover","params":{` + meta(future) + `}}`, 400, -32022},
		{"unsupported MCP-Protocol-Version header", "1999-12-31", "", "",
			`{"jsonrpc":"2.0","id":6,"method":"tools/list","params":{}}`, 400, -32022},
		{"unknown method, protocol 2025-06-18: a JSON-RPC answer", "2025-06-18", "", "",
			`{"jsonrpc":"2.0","id":7,"method":"` + marker + `/go","params":{}}`, 200, -32601},
	}
	for _, c := range cases {
		headers := map[string]string{"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": c.version}
		if c.method != "" {
			headers["Mcp-Method"] = c.method
		}
		if c.name != "" {
			headers["Mcp-Name"] = c.name
		}
		r := raw(t, w.e, "POST", "/mcp", key, "application/json", []byte(c.body), headers)
		var m struct {
			Error *struct {
				Code    float64         `json:"code"`
				Message string          `json:"message"`
				Data    json.RawMessage `json:"data"`
			} `json:"error"`
		}
		json.Unmarshal(r.Raw, &m) //nolint:errcheck
		if r.Status != c.status || m.Error == nil || m.Error.Code != c.code {
			t.Errorf("%s: want %d with JSON-RPC error %v, got %d %s", c.what, c.status, c.code, r.Status, r.Raw)
			continue
		}
		for _, echoed := range []string{marker, future, "1999-12-31"} {
			if bytes.Contains(r.Raw, []byte(echoed)) {
				t.Errorf("%s: echoes the request: %s", c.what, r.Raw)
			}
		}
		if c.code == -32022 {
			var data struct {
				Supported []string `json:"supported"`
			}
			if json.Unmarshal(m.Error.Data, &data) != nil || !slices.Equal(data.Supported, mcp.SupportedProtocolVersions()) {
				t.Errorf("%s: data %s, want the supported versions %v", c.what, m.Error.Data, mcp.SupportedProtocolVersions())
			}
		} else if m.Error.Data != nil {
			t.Errorf("%s: carries data %s", c.what, m.Error.Data)
		}
	}
}

// The SDK's plain-text refusals a caller can fix themselves (a curl with Accept:
// application/json alone, a batch on a protocol without batches, an empty body, a GET) say
// what to fix, in a fixed message.
func TestMCPRefusalsSayWhatToFix(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "a")
	key := w.agents["a"].Key
	list := `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`
	cases := []struct {
		what, method, accept, body string
		status                     int
		hint                       string
	}{
		{"Accept without text/event-stream", "POST", "application/json", list, 400, "Accept header must list both"},
		{"a batch on 2025-06-18", "POST", "application/json, text/event-stream", "[" + list + "]", 400, "not a batch"},
		{"an empty body", "POST", "application/json, text/event-stream", "", 400, "body is empty"},
		{"GET", "GET", "text/event-stream", "", 405, "POST only"},
	}
	for _, c := range cases {
		r := raw(t, w.e, c.method, "/mcp", key, "application/json", []byte(c.body), map[string]string{"Accept": c.accept, "MCP-Protocol-Version": "2025-06-18"})
		var m struct {
			Error *struct {
				Code    float64 `json:"code"`
				Message string  `json:"message"`
			} `json:"error"`
		}
		json.Unmarshal(r.Raw, &m) //nolint:errcheck
		if r.Status != c.status || m.Error == nil || m.Error.Code != -32600 || !strings.Contains(m.Error.Message, c.hint) {
			t.Errorf("%s: want %d, -32600 saying %q; got %d %s", c.what, c.status, c.hint, r.Status, r.Raw)
		}
	}
}

// Finding 8: the product's own credentials — a live agent key, an issued admin token, and
// anything shaped like them — are credentials for the payload and file URL rules.
func TestOwnSecretsAreCredentials(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "a", "b")
	a, b := w.agents["a"], w.agents["b"]
	adminToken := w.e.Admin("POST", "/tokens", map[string]any{"label": "ops"})["token"].(string)
	send := func(extra map[string]any) func() testenv.Response {
		return func() testenv.Response {
			body := map[string]any{"destination": dmTo(b), "body_md": "see attached", "idempotency_key": newKey()}
			for k, v := range extra {
				body[k] = v
			}
			return a.Call("POST", "/messages", body)
		}
	}
	for _, secret := range []string{b.Key, adminToken, "abk_" + strings.Repeat("Q", 43), "abadm_" + strings.Repeat("z", 43)} {
		rejects(t, w.e, "payload value", send(map[string]any{"payload": map[string]any{"note": "use " + secret}}), "INVALID_ARGUMENT", "credential_in_payload", "payload.note")
		rejects(t, w.e, "file URL", send(map[string]any{"files": []any{map[string]any{"url": "https://example.com/" + secret + "/f", "display_name": "f"}}}), "INVALID_ARGUMENT", "file_url_rejected", "files[0].url")
	}
}
