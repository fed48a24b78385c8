package mcphttp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbox/agentbox/internal/auth"
	"github.com/agentbox/agentbox/internal/mcpserver"
	"github.com/agentbox/agentbox/internal/mcpserver/mcphttp"
	"github.com/agentbox/agentbox/internal/metrics"
	"github.com/agentbox/agentbox/internal/testenv"
)

// The fast path writes, for every tools/call it answers, the response the SDK writes for
// the same request: same status, headers and bytes. Each request goes first to a handler
// that sends everything through the SDK, then to the real one (which must take the fast
// path), on the same server state; write requests are idempotent replays or rejections, so
// the state the second sees is the state the first saw.
func TestFastPathAnswersAsTheSDK(t *testing.T) {
	t.Parallel()
	e := testenv.New(t)
	e.Box("alpha")
	e.Box("beta")
	a := e.NewAgent("alpha", "a", nil)
	a.Prime()
	// Characters json.Marshal escapes and EncodeMessage does not, in a result and in an id.
	a.MustCall("PUT", "/checkpoint", map[string]any{"expected_revision": "0", "checkpoint": map[string]any{"step": 1, "note": "<b>a & b</b>\u2028\u2029 é \\ \""}, "idempotency_key": "first"})
	rk := e.Admin("POST", "/boxes/alpha/agents/a/keys", map[string]any{"router": true})
	routerKey, _ := rk["api_key"].(string)

	log := slog.New(slog.DiscardHandler)
	cfg := mcphttp.Config{Service: e.Service, Auth: auth.New(e.Store, testenv.AdminToken, log), Log: log, Metrics: metrics.New(e.Store.Pool()), Version: "test"}
	fastSrv, sdkSrv := httptest.NewServer(mcphttp.New(cfg)), httptest.NewServer(mcphttp.NewSDKOnly(cfg))
	t.Cleanup(fastSrv.Close)
	t.Cleanup(sdkSrv.Close)

	call := func(id, name, args string) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":%q,"arguments":%s}}`, id, name, args)
	}
	// What the Go SDK client sends in the 2026-07-28 protocol (SEP-2575): the protocol
	// version, its Implementation and capabilities in every request's _meta.
	call2026 := func(id, name, args string) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/clientCapabilities":{"roots":{"listChanged":true}},"io.modelcontextprotocol/clientInfo":{"name":"agentbox-test","version":"1"},"io.modelcontextprotocol/protocolVersion":"2026-07-28"},"name":%q,"arguments":%s}}`, id, name, args)
	}
	cases := []struct{ name, key, version, body string }{
		{"2026-07-28: checkpoint_get", a.Key, "2026-07-28", call2026("21", "checkpoint_get", `{"box_key":"alpha"}`)},
		{"2026-07-28: string id", a.Key, "2026-07-28", call2026(`"req-22"`, "checkpoint_get", `{"box_key":"alpha"}`)},
		{"2026-07-28: string id to escape", a.Key, "2026-07-28", call2026(`"<id&\u2028>"`, "checkpoint_get", `{"box_key":"alpha"}`)},
		{"2026-07-28: checkpoint_save replay", a.Key, "2026-07-28", call2026("23", "checkpoint_save", `{"box_key":"alpha","expected_revision":"0","checkpoint":{"step":1,"note":"<b>a & b</b>\u2028\u2029 é \\ \""},"idempotency_key":"first"}`)},
		{"2026-07-28: isError (conflict)", a.Key, "2026-07-28", call2026("24", "checkpoint_save", `{"box_key":"alpha","expected_revision":"0","checkpoint":{"step":2},"idempotency_key":"second"}`)},
		{"2026-07-28: invalid arguments", a.Key, "2026-07-28", call2026("25", "checkpoint_save", `{"box_key":"alpha","checkpoint":"x"}`)},
		{"2026-07-28: another box", a.Key, "2026-07-28", call2026("26", "agent_prime", `{"box_key":"beta"}`)},
		{"2026-07-28: alias", a.Key, "2026-07-28", call2026("27", "rooms_list", `{"box_key":"alpha"}`)},
		{"2026-07-28 router: tool_execute", routerKey, "2026-07-28", call2026("28", "tool_execute", `{"box_key":"alpha","name":"checkpoint_get","arguments":{}}`)},
		{"checkpoint_get", a.Key, "2025-06-18", call("1", "checkpoint_get", `{"box_key":"alpha"}`)},
		{"string id, oldest version", a.Key, "2024-11-05", call(`"req-7"`, "checkpoint_get", `{"box_key":"alpha"}`)},
		{"string id to escape", a.Key, "2025-06-18", call(`"<id&\u2028>"`, "checkpoint_get", `{"box_key":"alpha"}`)},
		{"checkpoint_save replay", a.Key, "2025-11-25", call("2", "checkpoint_save", `{"box_key":"alpha","expected_revision":"0","checkpoint":{"step":1,"note":"<b>a & b</b>\u2028\u2029 é \\ \""},"idempotency_key":"first"}`)},
		{"checkpoint_save conflict", a.Key, "2025-06-18", call("3", "checkpoint_save", `{"box_key":"alpha","expected_revision":"0","checkpoint":{"step":2},"idempotency_key":"second"}`)},
		{"invalid arguments", a.Key, "2025-06-18", call("4", "checkpoint_save", `{"box_key":"alpha","checkpoint":"x"}`)},
		{"unknown argument", a.Key, "2025-03-26", call("5", "checkpoint_get", `{"box_key":"alpha","extra":1}`)},
		{"another box", a.Key, "2025-06-18", call("6", "agent_prime", `{"box_key":"beta"}`)},
		{"no arguments", a.Key, "2025-06-18", `{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"checkpoint_get"}}`},
		{"alias", a.Key, "2025-06-18", call("9", "rooms_list", `{"box_key":"alpha"}`)},
		{"inbox_list", a.Key, "2025-06-18", call("10", "inbox_list", `{"box_key":"alpha"}`)},
		{"router: tool_execute", routerKey, "2025-06-18", call("11", "tool_execute", `{"box_key":"alpha","name":"checkpoint_get","arguments":{}}`)},
		{"router: tool_search", routerKey, "2025-06-18", call("12", "tool_search", `{"box_key":"alpha","query":"checkpoint"}`)},
	}
	post := func(url, key, version, body string) (*http.Request, *http.Response, []byte) {
		var name struct {
			Params struct {
				Name string `json:"name"`
			} `json:"params"`
		}
		if err := json.Unmarshal([]byte(body), &name); err != nil {
			t.Fatal(err)
		}
		req, err := http.NewRequest("POST", url+"/mcp", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Protocol-Version", version)
		if version >= "2026-07-28" { // the standard headers of SEP-2243, as the Go client sends them
			req.Header.Set("Mcp-Method", "tools/call")
			req.Header.Set("Mcp-Name", name.Params.Name)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		return req, resp, raw
	}
	for _, c := range cases {
		_, sdkResp, sdkBody := post(sdkSrv.URL, c.key, c.version, c.body)
		req, fastResp, fastBody := post(fastSrv.URL, c.key, c.version, c.body)
		if !mcphttp.FastPathShape(req, []byte(c.body)) {
			t.Fatalf("%s: the request is not one the fast path answers", c.name)
		}
		if sdkResp.StatusCode != 200 || !bytes.Contains(sdkBody, []byte(`"result":`)) {
			t.Fatalf("%s: the SDK answered %d %s", c.name, sdkResp.StatusCode, sdkBody)
		}
		if fastResp.StatusCode != sdkResp.StatusCode || !bytes.Equal(fastBody, sdkBody) {
			t.Errorf("%s:\nfast %d %s\nsdk  %d %s", c.name, fastResp.StatusCode, fastBody, sdkResp.StatusCode, sdkBody)
		}
		for _, h := range []string{"Content-Type", "Cache-Control", "Content-Length", "Mcp-Session-Id", "X-Content-Type-Options"} {
			if f, s := fastResp.Header.Values(h), sdkResp.Header.Values(h); strings.Join(f, ",") != strings.Join(s, ",") {
				t.Errorf("%s: header %s: fast %q, sdk %q", c.name, h, f, s)
			}
		}
		if len(fastResp.Header) != len(sdkResp.Header) {
			t.Errorf("%s: headers: fast %v, sdk %v", c.name, fastResp.Header, sdkResp.Header)
		}
	}
}

// recorder keeps the tools/call requests an HTTP client sends.
type recorder struct {
	headerTransport
	calls []recorded
}

type recorded struct {
	req  *http.Request
	body []byte
}

func (rec *recorder) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return nil, err
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		if bytes.Contains(body, []byte(`"tools/call"`)) {
			rec.calls = append(rec.calls, recorded{r.Clone(r.Context()), body})
		}
	}
	return rec.headerTransport.RoundTrip(r)
}

// What the official Go SDK client sends, at each protocol version it negotiates with this
// server (after initialize, or in the 2026-07-28 protocol with per-request _meta and the
// Mcp-Method and Mcp-Name headers), is a request the fast path answers.
func TestGoClientToolCallsTakeTheFastPath(t *testing.T) {
	t.Parallel()
	e := testenv.New(t)
	e.Box("alpha")
	a := e.NewAgent("alpha", "a", nil)
	for _, version := range append([]string{""}, mcp.SupportedProtocolVersions()...) {
		rec := &recorder{headerTransport: headerTransport{map[string]string{"Authorization": "Bearer " + a.Key}}}
		transport := &mcp.StreamableClientTransport{Endpoint: e.URL + "/mcp", HTTPClient: &http.Client{Transport: rec}, MaxRetries: -1}
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "agentbox-test", Version: "1"}, nil).Connect(context.Background(), transport, &mcp.ClientSessionOptions{ProtocolVersion: version})
		if err != nil {
			t.Fatalf("connect (version %q): %v", version, err)
		}
		toolCall(t, cs, "agent_prime", map[string]any{"box_key": "alpha"}).must(t, "prime")
		negotiated := cs.InitializeResult().ProtocolVersion
		if version == "" && negotiated != "2026-07-28" {
			t.Errorf("the client's default negotiated %s, not 2026-07-28", negotiated)
		}
		cs.Close()
		if len(rec.calls) != 1 {
			t.Fatalf("version %q: %d tools/call requests recorded", version, len(rec.calls))
		}
		c := rec.calls[0]
		if got := mcphttp.FastPathShape(c.req, c.body); !got {
			t.Errorf("version %q (negotiated %s): fast path %v for %s %v", version, negotiated, got, c.body, c.req.Header)
		}
	}
}

// Requests outside the one shape stay the SDK's: whatever the SDK does with them is what
// the client gets.
func TestFastPathLeavesOtherRequestsToTheSDK(t *testing.T) {
	const get = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"checkpoint_get","arguments":{"box_key":"alpha"}}}`
	const get2026 = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/clientCapabilities":{"roots":{"listChanged":true}},"io.modelcontextprotocol/clientInfo":{"name":"agentbox-test","version":"1"},"io.modelcontextprotocol/protocolVersion":"2026-07-28"},"name":"checkpoint_get","arguments":{"box_key":"alpha"}}}`
	v2026Headers := map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "checkpoint_get"}
	merge := func(a, b map[string]string) map[string]string {
		m := map[string]string{}
		for k, v := range a {
			m[k] = v
		}
		for k, v := range b {
			m[k] = v
		}
		return m
	}
	cases := []struct {
		name    string
		headers map[string]string
		body    string
	}{
		{"baseline (taken)", nil, get},
		{"2026-07-28 (taken)", v2026Headers, get2026},
		{"no protocol version", map[string]string{"Mcp-Protocol-Version": ""}, get},
		{"unsupported version", map[string]string{"Mcp-Protocol-Version": "2099-01-01"}, get},
		{"2026-07-28 header, no _meta", v2026Headers, get},
		{"2026-07-28 _meta, older header", nil, get2026},
		{"2026-07-28 _meta with a log level", v2026Headers, strings.Replace(get2026, `"_meta":{`, `"_meta":{"io.modelcontextprotocol/logLevel":"debug",`, 1)},
		{"2026-07-28 _meta with a progress token", v2026Headers, strings.Replace(get2026, `"_meta":{`, `"_meta":{"progressToken":1,`, 1)},
		{"2026-07-28 _meta without clientInfo", v2026Headers, strings.Replace(get2026, `"io.modelcontextprotocol/clientInfo":{"name":"agentbox-test","version":"1"},`, `"x":1,`, 1)},
		{"2026-07-28 _meta with bad capabilities", v2026Headers, strings.Replace(get2026, `{"roots":{"listChanged":true}}`, `[]`, 1)},
		{"2026-07-28 _meta, other version", v2026Headers, strings.Replace(get2026, `"io.modelcontextprotocol/protocolVersion":"2026-07-28"`, `"io.modelcontextprotocol/protocolVersion":"2026-08-01"`, 1)},
		{"2026-07-28 no Mcp-Method", merge(v2026Headers, map[string]string{"Mcp-Method": ""}), get2026},
		{"2026-07-28 other Mcp-Method", merge(v2026Headers, map[string]string{"Mcp-Method": "tools/list"}), get2026},
		{"2026-07-28 no Mcp-Name", merge(v2026Headers, map[string]string{"Mcp-Name": ""}), get2026},
		{"2026-07-28 other Mcp-Name", merge(v2026Headers, map[string]string{"Mcp-Name": "agent_prime"}), get2026},
		{"2026-07-28 Mcp-Param header", merge(v2026Headers, map[string]string{"Mcp-Param-Box": "alpha"}), get2026},
		{"session id", map[string]string{"Mcp-Session-Id": "s1"}, get},
		{"text/plain", map[string]string{"Content-Type": "text/plain"}, get},
		{"accept json only", map[string]string{"Accept": "application/json"}, get},
		{"batch", nil, "[" + get + "]"},
		{"notification", nil, `{"jsonrpc":"2.0","method":"tools/call","params":{"name":"checkpoint_get"}}`},
		{"null id", nil, `{"jsonrpc":"2.0","id":null,"method":"tools/call","params":{"name":"checkpoint_get"}}`},
		{"object id", nil, `{"jsonrpc":"2.0","id":{},"method":"tools/call","params":{"name":"checkpoint_get"}}`},
		{"other method", nil, `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`},
		{"initialize", nil, initialize},
		{"_meta", nil, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"progressToken":1},"name":"checkpoint_get"}}`},
		{"no name", nil, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":{}}}`},
		{"capitalized key", nil, `{"jsonrpc":"2.0","ID":1,"method":"tools/call","params":{"name":"checkpoint_get"}}`},
		{"extra key", nil, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"checkpoint_get"},"x":1}`},
		{"wrong version tag", nil, `{"jsonrpc":"1.0","id":1,"method":"tools/call","params":{"name":"checkpoint_get"}}`},
		{"not JSON", nil, `{"jsonrpc":`},
		{"repeated key", nil, `{"jsonrpc":"2.0","id":1,"id":2,"method":"tools/call","params":{"name":"checkpoint_get"}}`},
		{"escaped key", nil, `{"jsonrpc":"2.0","\u0069d":1,"method":"tools/call","params":{"name":"checkpoint_get"}}`},
		{"escaped method", nil, `{"jsonrpc":"2.0","id":1,"method":"tools\/call","params":{"name":"checkpoint_get"}}`},
		{"null params", nil, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":null}`},
		{"lone surrogate", nil, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"checkpoint_get","arguments":{"box_key":"\ud800"}}}`},
	}
	for _, c := range cases {
		req, err := http.NewRequest("POST", "http://127.0.0.1/mcp", strings.NewReader(c.body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
		for k, v := range c.headers {
			if v == "" {
				req.Header.Del(k)
			} else {
				req.Header.Set(k, v)
			}
		}
		if got, want := mcphttp.FastPathShape(req, []byte(c.body)), strings.HasSuffix(c.name, "(taken)"); got != want {
			t.Errorf("%s: fast path %v, want %v", c.name, got, want)
		}
	}
}

// The fast path writes a success in one pass over each copy of the body, and its bytes are
// the SDK's for every body: characters json.Marshal escapes (<, >, &, U+2028, U+2029) and
// the ones it leaves (non-ASCII, escaped quotes and backslashes), in results and in ids.
func TestOnePassSuccessIsTheSDKEncoding(t *testing.T) {
	t.Parallel()
	_, calls := mcpserver.Build(nil, mcpserver.Options{Version: "test <&>"})
	bodies := []string{
		`{}`,
		`{"revision":"3","checkpoint":{"step":1}}`,
		`{"note":"<b>a & b</b>","x":"\u2028\u2029","y":"é ✓ 😀","z":"\\ \" \n \u0000 \u003c"}`,
		"{\"raw\":\"\u2028 and \u2029 unescaped\",\"n\":[1,2.5,-3e10,true,false,null]}",
		`[]`,
		`"a string <result>"`,
	}
	ids := []any{float64(7), "req-1", "<id & \u2028>", float64(0)} // as JSON decodes them
	for _, body := range bodies {
		for _, raw := range ids {
			id, err := jsonrpc.MakeID(raw)
			if err != nil {
				t.Fatal(err)
			}
			for _, v2026 := range []bool{false, true} {
				fast, sdk, err := mcphttp.SuccessResponses(calls, id, body, v2026)
				if err != nil {
					t.Fatal(err)
				}
				if fast == nil {
					t.Fatalf("body %s, id %v, 2026 %v: the one-pass encoder declined a success", body, raw, v2026)
				}
				if !bytes.Equal(fast, sdk) {
					t.Errorf("body %s, id %v, 2026 %v:\nfast %s\nsdk  %s", body, raw, v2026, fast, sdk)
				}
			}
		}
	}
}
