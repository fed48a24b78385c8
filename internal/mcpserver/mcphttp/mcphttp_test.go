package mcphttp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	genmcp "github.com/agentbox/agentbox/gen/mcp"
	"github.com/agentbox/agentbox/internal/schema"
	"github.com/agentbox/agentbox/internal/testenv"
)

const initialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`

// /mcp authenticates at the HTTP level: 401 with the error body before any MCP processing.
func TestMCPAuthenticationIsHTTP401WithTheErrorBody(t *testing.T) {
	t.Parallel()
	e := testenv.New(t)
	e.Box("alpha")
	a := e.NewAgent("alpha", "a", nil)
	e.Admin("POST", "/boxes/alpha/keys/"+a.KeyID+"/revoke", nil)
	off := e.NewAgent("alpha", "off", nil)
	e.Admin("PATCH", "/boxes/alpha/agents/off", map[string]any{"enabled": false})
	e.Box("gamma")
	inOffBox := e.NewAgent("gamma", "g", nil)
	e.Admin("PATCH", "/boxes/gamma", map[string]any{"enabled": false})
	e.Admin("POST", "/boxes/alpha/hosts", map[string]any{"name": "remote", "ips": []string{"10.1.2.3"}})
	elsewhere := e.NewAgent("alpha", "remote-agent", map[string]any{"host_name": "remote"})
	for name, headers := range map[string]map[string]string{
		"no key":             {},
		"unknown key":        {"Authorization": "Bearer abk_nope"},
		"revoked key":        {"Authorization": "Bearer " + a.Key},
		"disabled agent":     {"Authorization": "Bearer " + off.Key},
		"disabled box":       {"Authorization": "Bearer " + inOffBox.Key},
		"another source IP":  {"Authorization": "Bearer " + elsewhere.Key},
		"forwarded-IP ruse":  {"Authorization": "Bearer " + elsewhere.Key, "X-Forwarded-For": "10.1.2.3"},
		"not a bearer token": {"Authorization": "Basic " + a.Key},
	} {
		status, body := rawPost(t, e, headers, initialize)
		var eb struct {
			Error struct{ Code string } `json:"error"`
		}
		if status != http.StatusUnauthorized || json.Unmarshal(body, &eb) != nil || eb.Error.Code != "AUTH_FAILED" {
			t.Errorf("%s: %d %s, want 401 with AUTH_FAILED", name, status, body)
		}
	}
}

// A key that has acted on /mcp is known, and its check rides in the tool call's transaction
// (auth.AgentKeyCall); a key refused since is still HTTP 401 with AUTH_FAILED, for a
// tools/call the server answers itself and for a request the SDK answers (initialize), and
// the refused call changes nothing.
func TestMCPKnownKeyRefusedIsHTTP401(t *testing.T) {
	t.Parallel()
	e := testenv.New(t)
	e.Box("alpha")
	a := e.NewAgent("alpha", "a", nil)
	headers := map[string]string{"Authorization": "Bearer " + a.Key, "Mcp-Protocol-Version": "2025-06-18"}
	save := func(step int) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"checkpoint_save","arguments":{"box_key":"alpha","expected_revision":"%d","checkpoint":{"step":%d},"idempotency_key":"s%d"}}}`, step, step-1, step, step)
	}
	if status, body := rawPost(t, e, headers, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"agent_prime","arguments":{"box_key":"alpha"}}}`); status != http.StatusOK {
		t.Fatalf("prime: %d %s", status, body)
	}
	if status, body := rawPost(t, e, headers, save(1)); status != http.StatusOK || strings.Contains(string(body), `"isError":true`) {
		t.Fatalf("save before: %d %s", status, body)
	}
	e.Admin("POST", "/boxes/alpha/keys/"+a.KeyID+"/revoke", nil)
	for name, body := range map[string]string{"tools/call": save(2), "initialize": initialize} {
		status, raw := rawPost(t, e, headers, body)
		var eb struct {
			Error struct{ Code string } `json:"error"`
		}
		if status != http.StatusUnauthorized || json.Unmarshal(raw, &eb) != nil || eb.Error.Code != "AUTH_FAILED" {
			t.Errorf("%s with a revoked known key: %d %s, want 401 with AUTH_FAILED", name, status, raw)
		}
	}
	if cp := a.Call("GET", "/checkpoint", nil); cp.Status != http.StatusUnauthorized {
		t.Fatalf("the revoked key over HTTP: %d %s", cp.Status, cp.Raw)
	}
	var rev int64
	if err := e.Store.Pool().QueryRow(context.Background(), "SELECT revision FROM checkpoints WHERE agent_id = $1", a.ID).Scan(&rev); err != nil || rev != 1 {
		t.Fatalf("the refused save wrote: revision %d (%v)", rev, err)
	}
}

// A present Origin must be in the allow-list, checked before authentication (so even a bad
// key gets 403, not 401); an absent Origin is allowed; the default allow-list is empty.
func TestMCPOriginAllowList(t *testing.T) {
	t.Parallel()
	e := testenv.New(t, testenv.Options{MCPAllowedOrigins: []string{"https://agents.example"}})
	e.Box("alpha")
	a := e.NewAgent("alpha", "a", nil)
	good := "Bearer " + a.Key
	cases := []struct {
		name    string
		headers map[string]string
		status  int
	}{
		{"disallowed origin, good key", map[string]string{"Origin": "https://evil.example", "Authorization": good}, 403},
		{"disallowed origin, bad key", map[string]string{"Origin": "https://evil.example", "Authorization": "Bearer abk_bad"}, 403},
		{"disallowed origin, no key", map[string]string{"Origin": "null"}, 403},
		{"allowed origin, good key", map[string]string{"Origin": "https://agents.example", "Authorization": good}, 200},
		{"allowed origin, bad key", map[string]string{"Origin": "https://agents.example", "Authorization": "Bearer abk_bad"}, 401},
		{"no origin, good key", map[string]string{"Authorization": good}, 200},
	}
	for _, c := range cases {
		status, body := rawPost(t, e, c.headers, initialize)
		if status != c.status {
			t.Errorf("%s: %d %s, want %d", c.name, status, body, c.status)
		}
		if status == 403 && (!strings.Contains(string(body), `"origin_not_allowed"`) || !strings.Contains(string(body), "Origin allow-list")) {
			t.Errorf("%s: 403 body %s", c.name, body)
		}
	}
	// The default configuration refuses every present Origin.
	d := testenv.New(t)
	d.Box("alpha")
	b := d.NewAgent("alpha", "b", nil)
	if status, body := rawPost(t, d, map[string]string{"Origin": "http://127.0.0.1", "Authorization": "Bearer " + b.Key}, initialize); status != 403 {
		t.Errorf("default allow-list: %d %s, want 403", status, body)
	}
}

// The key authenticates the caller; each call's box_key must be the key's box.
func TestMCPWrongBoxFailsClosed(t *testing.T) {
	t.Parallel()
	e := testenv.New(t)
	e.Box("alpha")
	e.Box("beta")
	a := e.NewAgent("alpha", "a", nil)
	e.NewAgent("beta", "b", nil)
	cs := mcpSession(t, e, a.Key, "", nil)
	if r := toolCall(t, cs, "agent_prime", map[string]any{"box_key": "beta"}); r.code() != "AUTH_FAILED" {
		t.Fatalf("prime in another box: %+v", r)
	}
	var sessions int
	if err := e.Store.Pool().QueryRow(context.Background(), "SELECT count(*) FROM sessions").Scan(&sessions); err != nil {
		t.Fatal(err)
	}
	if sessions != 0 {
		t.Fatalf("a refused call opened %d sessions", sessions)
	}
	toolCall(t, cs, "agent_prime", map[string]any{"box_key": "alpha"}).must(t, "prime in the key's box")
}

// SPEC §3: the Agentbox-Session header names the session, else (stateless /mcp has no MCP
// session ID) the API key's lane: the same sessions the HTTP API uses for the same key.
func TestMCPSessionKeyRule(t *testing.T) {
	t.Parallel()
	e := testenv.New(t)
	e.Box("alpha")
	a := e.NewAgent("alpha", "a", nil)
	sessionOf := func(m map[string]any) string { return str(m["session"].(map[string]any)["session_id"]) }

	lane := sessionOf(toolCall(t, mcpSession(t, e, a.Key, "", nil), "agent_prime", map[string]any{"box_key": "alpha"}).must(t, "prime"))
	if http := sessionOf(a.Prime()); http != lane {
		t.Errorf("key lane: MCP session %s, HTTP session %s", lane, http)
	}
	named := mcpSession(t, e, a.Key, "", map[string]string{"Agentbox-Session": "s1"})
	s1 := sessionOf(toolCall(t, named, "agent_prime", map[string]any{"box_key": "alpha"}).must(t, "prime s1"))
	if s1 == lane {
		t.Error("the Agentbox-Session header did not select its own session")
	}
	if http := sessionOf(a.WithSession("s1").Prime()); http != s1 {
		t.Errorf("header s1: MCP session %s, HTTP session %s", s1, http)
	}
	// A session primed over HTTP serves MCP reads: same rule, same storage.
	toolCall(t, named, "checkpoint_get", map[string]any{"box_key": "alpha"}).must(t, "checkpoint_get in s1")
	unprimed := mcpSession(t, e, a.Key, "", map[string]string{"Agentbox-Session": "s2"})
	if r := toolCall(t, unprimed, "checkpoint_get", map[string]any{"box_key": "alpha"}); r.code() != "NOT_PRIMED" {
		t.Errorf("unprimed session: %+v", r)
	}
}

// Every protocol version the pinned SDK negotiates, driven by the official Go SDK client
// against the real server; clients before structured output read the text mirror.
func TestMCPProtocolVersionsGoSDK(t *testing.T) {
	t.Parallel()
	e := testenv.New(t)
	e.Box("alpha")
	a := e.NewAgent("alpha", "a", nil)
	versions := mcp.SupportedProtocolVersions()
	for _, want := range []string{"2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28"} {
		if !slices.Contains(versions, want) {
			t.Errorf("the pinned SDK no longer negotiates %s", want)
		}
	}
	for _, version := range versions {
		t.Run(version, func(t *testing.T) {
			cs := mcpSession(t, e, a.Key, version, map[string]string{"Agentbox-Session": "v-" + version})
			if got := cs.InitializeResult().ProtocolVersion; got != version {
				t.Fatalf("negotiated %s, want %s", got, version)
			}
			if cs.InitializeResult().Instructions != genmcp.Server.Instructions {
				t.Errorf("instructions = %q", cs.InitializeResult().Instructions)
			}
			tools, err := cs.ListTools(context.Background(), nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(tools.Tools) == 0 {
				t.Fatal("empty tools/list")
			}
			prime := toolCall(t, cs, "agent_prime", map[string]any{"box_key": "alpha"}).must(t, "prime")
			if prime["agent"].(map[string]any)["name"] != "a" {
				t.Errorf("prime: %v", prime)
			}
			save := toolCall(t, cs, "checkpoint_save", map[string]any{"box_key": "alpha", "expected_revision": "0",
				"checkpoint": map[string]any{"v": version}, "idempotency_key": "save-" + version})
			// All versions share the agent's checkpoint: the first save wins, later ones conflict.
			if save.Error != nil && save.code() != "REVISION_CONFLICT" {
				t.Fatalf("checkpoint_save: %v", save.Error)
			}
			// The text mirror alone carries the result (what a pre-2025-06-18 client reads).
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "checkpoint_get", Arguments: map[string]any{"box_key": "alpha"}})
			if err != nil || res.IsError {
				t.Fatalf("checkpoint_get: %v %+v", err, res)
			}
			var mirror struct {
				Revision   string         `json:"revision"`
				Checkpoint map[string]any `json:"checkpoint"`
			}
			if err := json.Unmarshal([]byte(res.Content[0].(*mcp.TextContent).Text), &mirror); err != nil || mirror.Revision == "" || mirror.Revision == "0" {
				t.Errorf("text mirror: %v %+v", err, mirror)
			}
			// An expected failure is a tool error, not a protocol error.
			if r := toolCall(t, cs, "checkpoint_save", map[string]any{"box_key": "alpha", "expected_revision": "0", "checkpoint": map[string]any{}, "idempotency_key": idem(), "extra": true}); r.code() != "INVALID_ARGUMENT" || str(r.Error["field"]) != "extra" {
				t.Errorf("unknown field: %+v", r)
			}
		})
	}
}

// Aliases are accepted by tools/call over /mcp and never listed.
func TestMCPAliasOverHTTP(t *testing.T) {
	t.Parallel()
	e := testenv.New(t)
	e.Box("alpha")
	a := e.NewAgent("alpha", "a", nil)
	cs := mcpSession(t, e, a.Key, "", nil)
	toolCall(t, cs, "agent_prime", map[string]any{"box_key": "alpha"}).must(t, "prime")
	tools, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for _, tl := range tools.Tools {
		listed[tl.Name] = true
	}
	alias, ok := genmcp.LookupTool("rooms_list")
	if !ok || alias.Name == "rooms_list" {
		t.Fatal("the registry has no alias rooms_list")
	}
	if listed["rooms_list"] || !listed[alias.Name] {
		t.Fatalf("listed: rooms_list %v, %s %v", listed["rooms_list"], alias.Name, listed[alias.Name])
	}
	viaAlias := toolCall(t, cs, "rooms_list", map[string]any{"box_key": "alpha"})
	viaName := toolCall(t, cs, alias.Name, map[string]any{"box_key": "alpha"})
	if viaAlias.Error != nil {
		t.Fatalf("rooms_list: %v", viaAlias.Error)
	}
	if !jsonEqual(viaAlias.OK, viaName.OK) || !jsonEqual(viaAlias.Error, viaName.Error) {
		t.Errorf("alias and canonical answers differ: %+v vs %+v", viaAlias, viaName)
	}
}

// A router key (admin key create --router) lists exactly four tools, executes every other
// tool with the same authorization, and cannot reach another box or the admin API.
func TestMCPRouterKey(t *testing.T) {
	t.Parallel()
	e := testenv.New(t)
	e.Box("alpha")
	e.Box("beta")
	a := e.NewAgent("alpha", "a", nil)
	e.NewAgent("beta", "b", nil)
	k := e.Admin("POST", "/boxes/alpha/agents/a/keys", map[string]any{"router": true})
	routerKey := str(k["api_key"])
	if k["router"] != true || routerKey == "" {
		t.Fatalf("router key: %v", k)
	}
	cs := mcpSession(t, e, routerKey, "", nil)
	tools, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
	}
	if strings.Join(names, ",") != "agent_prime,tool_describe,tool_execute,tool_search" {
		t.Fatalf("router tools/list = %v", names)
	}
	toolCall(t, cs, "agent_prime", map[string]any{"box_key": "alpha"}).must(t, "prime")
	exec := func(name string, args map[string]any) result {
		return toolCall(t, cs, "tool_execute", map[string]any{"box_key": "alpha", "name": name, "arguments": args})
	}
	saved := exec("checkpoint_save", map[string]any{"expected_revision": "0", "checkpoint": map[string]any{"n": 1}, "idempotency_key": idem()}).must(t, "execute checkpoint_save")
	if saved["result"].(map[string]any)["revision"] != "1" {
		t.Fatalf("execute checkpoint_save: %v", saved)
	}
	// Every other tool is reachable: each either succeeds or fails with a product error
	// (never an unknown tool, never an authorization widening).
	for _, rt := range genmcp.Tools {
		if rt.OperationID == "" {
			continue
		}
		r := exec(rt.Name, map[string]any{})
		if r.Error != nil && (r.reason() == "unknown_tool" || r.code() == "AUTH_FAILED") {
			t.Errorf("execute %s: %v", rt.Name, r.Error)
		}
	}
	// Same authorization: another box fails closed, and nothing is written there.
	if r := exec("checkpoint_save", map[string]any{"box_key": "beta", "expected_revision": "0", "checkpoint": map[string]any{}, "idempotency_key": idem()}); r.code() != "AUTH_FAILED" {
		t.Fatalf("execute in another box: %+v", r)
	}
	var n int
	if err := e.Store.Pool().QueryRow(context.Background(), "SELECT count(*) FROM checkpoints c JOIN boxes b ON b.box_id = c.box_id WHERE b.box_key = 'beta'").Scan(&n); err != nil || n != 0 {
		t.Fatalf("beta checkpoints: %d %v", n, err)
	}
	// No admin operation is a tool, and the agent key is no admin credential.
	if r := exec("admin_box_list", map[string]any{}); r.reason() != "unknown_tool" {
		t.Errorf("execute admin_box_list: %+v", r)
	}
	if r := e.Do("GET", "/admin/api/v1/boxes", routerKey, nil, nil); r.Status != 401 {
		t.Errorf("router key on the admin API: %d", r.Status)
	}
	// Recursion is refused.
	if r := exec("tool_execute", map[string]any{"name": "checkpoint_get", "arguments": map[string]any{}}); r.reason() != "unknown_tool" {
		t.Errorf("recursive execute: %+v", r)
	}
	// The ordinary key of the same agent keeps the full list.
	full, err := mcpSession(t, e, a.Key, "", nil).ListTools(context.Background(), nil)
	if err != nil || len(full.Tools) <= 4 {
		t.Fatalf("full list: %v %d", err, len(full.Tools))
	}
}

// A result is encoded once, by the service, and both transports send those bytes: the MCP
// text mirror is the HTTP body (without its trailing newline), HTML characters unescaped,
// and an idempotent replay over MCP returns the bytes recorded by the HTTP call.
func TestMCPResultIsTheHTTPBody(t *testing.T) {
	t.Parallel()
	e := testenv.New(t)
	e.Box("alpha")
	a := e.NewAgent("alpha", "a", nil)
	a.Prime()
	save := map[string]any{"expected_revision": "0", "checkpoint": map[string]any{"note": `<b>plan</b> & "next" -> done`}, "idempotency_key": "k1"}
	saved := a.Call("PUT", "/checkpoint", save)
	if saved.Status != http.StatusOK {
		t.Fatalf("save: %d %s", saved.Status, saved.Raw)
	}
	got := a.Call("GET", "/checkpoint", nil)
	cs := mcpSession(t, e, a.Key, "", nil)
	mirror := toolCall(t, cs, "checkpoint_get", map[string]any{"box_key": "alpha"}).Text
	if want := strings.TrimSuffix(string(got.Raw), "\n"); mirror != want {
		t.Errorf("MCP text mirror differs from the HTTP body:\n mcp  %s\n http %s", mirror, want)
	}
	b := e.NewAgent("alpha", "b", nil)
	b.Prime()
	a.MustCall("POST", "/messages", map[string]any{"destination": map[string]any{"kind": "dm", "recipient_agent_id": b.ID.String()},
		"body_md": `<b>plan</b> & "next" -> done`, "idempotency_key": "k2"})
	inbox := b.Call("GET", "/inbox", nil)
	if !bytes.Contains(inbox.Raw, []byte(`"<b>plan</b> & \"next\" -> done"`)) {
		t.Errorf("the HTTP body escapes or alters the message text: %s", inbox.Raw)
	}
	mcpInbox := toolCall(t, mcpSession(t, e, b.Key, "", nil), "inbox_list", map[string]any{"box_key": "alpha"}).Text
	if !strings.Contains(mcpInbox, `"<b>plan</b> & \"next\" -> done"`) {
		t.Errorf("the MCP text mirror escapes or alters the message text: %s", mcpInbox)
	}
	replay := save
	replay["box_key"] = "alpha"
	if r := toolCall(t, cs, "checkpoint_save", replay).Text; r != strings.TrimSuffix(string(saved.Raw), "\n") {
		t.Errorf("MCP replay differs from the recorded HTTP result:\n mcp  %s\n http %s", r, saved.Raw)
	}
}

// A tool call's arguments have the HTTP API's body bound on /mcp too (over stdio they become
// that body): arguments over it — here a checkpoint padded with JSON whitespace, valid and
// within every field's own cap — are LIMIT_EXCEEDED request_too_large as a tool error, and
// nothing is written; the same arguments just under the bound are saved.
func TestMCPArgumentsHaveTheHTTPBodyBound(t *testing.T) {
	t.Parallel()
	e := testenv.New(t)
	e.Box("alpha")
	a := e.NewAgent("alpha", "a", nil)
	headers := map[string]string{"Authorization": "Bearer " + a.Key, "Mcp-Protocol-Version": "2025-06-18"}
	if status, body := rawPost(t, e, headers, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"agent_prime","arguments":{"box_key":"alpha"}}}`); status != http.StatusOK {
		t.Fatalf("prime: %d %s", status, body)
	}
	save := func(argBytes int, key string) string {
		args := fmt.Sprintf(`{"box_key":"alpha","expected_revision":"0","checkpoint":{"step":1},"idempotency_key":"%s"}`, key)
		args = args[:len(args)-1] + strings.Repeat(" ", argBytes-len(args)) + "}"
		return `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"checkpoint_save","arguments":` + args + `}}`
	}
	status, raw := rawPost(t, e, headers, save(schema.MaxRequestBytes+1, "over"))
	var res struct {
		Result struct {
			IsError           bool `json:"isError"`
			StructuredContent struct {
				Error struct {
					Code   string `json:"code"`
					Reason string `json:"reason"`
					Limit  int64  `json:"limit"`
				} `json:"error"`
			} `json:"structuredContent"`
		} `json:"result"`
	}
	if err := json.Unmarshal(raw, &res); status != http.StatusOK || err != nil || !res.Result.IsError {
		t.Fatalf("arguments over the bound: %d %.300s", status, raw)
	}
	if got := res.Result.StructuredContent.Error; got.Code != "LIMIT_EXCEEDED" || got.Reason != "request_too_large" || got.Limit != schema.MaxRequestBytes {
		t.Fatalf("arguments over the bound: %+v", got)
	}
	var n int
	if err := e.Store.Pool().QueryRow(context.Background(), "SELECT count(*) FROM checkpoints WHERE agent_id = $1", a.ID).Scan(&n); err != nil || n != 0 {
		t.Fatalf("the refused save wrote: %d rows (%v)", n, err)
	}
	if status, raw := rawPost(t, e, headers, save(schema.MaxRequestBytes, "at")); status != http.StatusOK || strings.Contains(string(raw), `"isError":true`) {
		t.Fatalf("arguments at the bound: %d %.300s", status, raw)
	}
}
