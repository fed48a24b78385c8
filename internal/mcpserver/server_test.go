package mcpserver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	genmcp "github.com/agentbox/agentbox/gen/mcp"
	"github.com/agentbox/agentbox/internal/apierr"
	"github.com/agentbox/agentbox/internal/mcpserver"
	"github.com/agentbox/agentbox/internal/schema"
)

var update = flag.Bool("update", false, "rewrite the committed tools/list snapshots in testdata/")

// fakeBackend answers every operation with a canned body; box "alpha" is the caller's.
type fakeBackend struct {
	mu    sync.Mutex
	calls []string // operationIds, in order
	fail  map[string]*apierr.Error
	body  map[string]json.RawMessage
}

func newFake() *fakeBackend {
	return &fakeBackend{fail: map[string]*apierr.Error{}, body: map[string]json.RawMessage{}}
}

func (f *fakeBackend) CheckBox(_ context.Context, _ *mcp.CallToolRequest, boxKey string) error {
	if boxKey != "alpha" {
		return apierr.Auth()
	}
	return nil
}

func (f *fakeBackend) Call(_ context.Context, _ *mcp.CallToolRequest, op *genmcp.Operation, args map[string]json.RawMessage) (json.RawMessage, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, op.OperationID)
	if e, ok := f.fail[op.OperationID]; ok {
		return nil, e
	}
	if b, ok := f.body[op.OperationID]; ok {
		return b, nil
	}
	return json.RawMessage(`{"op":"` + op.OperationID + `","echo":` + string(mustJSON(args)) + `}`), nil
}

func (f *fakeBackend) called() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// connect serves b in one mode over in-memory transports and returns a Go SDK client
// session that negotiated version ("" = the SDK's default).
func connect(t *testing.T, b mcpserver.Backend, router bool, version string) *mcp.ClientSession {
	t.Helper()
	ctx := context.Background()
	s := mcpserver.New(b, mcpserver.Options{Router: router})
	st, ct := mcp.NewInMemoryTransports()
	ss, err := s.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	cs, err := c.Connect(ctx, ct, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func call(t *testing.T, cs *mcp.ClientSession, name string, args any) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("tools/call %s: %v", name, err)
	}
	return res
}

// toolError returns structuredContent.error of an isError result (fails otherwise).
func toolError(t *testing.T, res *mcp.CallToolResult) map[string]any {
	t.Helper()
	if !res.IsError {
		t.Fatalf("want an error result, got %s", text(t, res))
	}
	var sc struct {
		Error map[string]any `json:"error"`
	}
	if err := json.Unmarshal(mustJSON(res.StructuredContent), &sc); err != nil || sc.Error == nil {
		t.Fatalf("structuredContent has no error object: %s", mustJSON(res.StructuredContent))
	}
	return sc.Error
}

func text(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	if len(res.Content) != 1 {
		t.Fatalf("want one content block, got %d", len(res.Content))
	}
	tc, ok := res.Content[0].(*mcp.TextContent)
	if !ok {
		t.Fatalf("content is %T, want text", res.Content[0])
	}
	return tc.Text
}

// listed is the served tools/list in its canonical form: the tools array as a client
// decodes it, re-encoded with sorted keys and without HTML escaping.
func listed(t *testing.T, router bool) []byte {
	t.Helper()
	cs := connect(t, newFake(), router, "")
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.NextCursor != "" {
		t.Fatal("tools/list is paginated; the snapshot expects one page")
	}
	b, err := mcpserver.Marshal(res.Tools)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestToolsListSnapshot is the surface guard: the served tools/list must equal the
// committed snapshot. Review a change, then rewrite it with
// `go test ./internal/mcpserver -run TestToolsListSnapshot -update` (make update-snapshots).
func TestToolsListSnapshot(t *testing.T) {
	for _, mode := range []struct {
		file   string
		router bool
	}{{"tools_list.json", false}, {"tools_list_router.json", true}} {
		t.Run(mode.file, func(t *testing.T) {
			var got bytes.Buffer
			if err := json.Indent(&got, listed(t, mode.router), "", "  "); err != nil {
				t.Fatal(err)
			}
			got.WriteByte('\n')
			path := filepath.Join("testdata", mode.file)
			if *update {
				if err := os.WriteFile(path, got.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (create it with -update)", err)
			}
			if !bytes.Equal(want, got.Bytes()) {
				t.Fatalf("the served tools/list differs from %s (an unreviewed surface change).\n"+
					"Review the diff; if intended, run `make update-snapshots` and commit the snapshot.\n%s",
					path, lineDiff(string(want), got.String()))
			}
		})
	}
}

// TestToolsListBudget checks the compact tools/list JSON against the committed budgets in
// spec/tool-contracts.json ("budgets"), and reports the measured sizes.
func TestToolsListBudget(t *testing.T) {
	full, router := len(listed(t, false)), len(listed(t, true))
	t.Logf("compact tools/list: full %d bytes (budget %d), router %d bytes (budget %d)",
		full, genmcp.Budgets.ToolsListBytes, router, genmcp.Budgets.RouterToolsListBytes)
	if full > genmcp.Budgets.ToolsListBytes {
		t.Errorf("tools/list is %d bytes, over its budget of %d (spec/tool-contracts.json budgets.tools_list_bytes)", full, genmcp.Budgets.ToolsListBytes)
	}
	if router > genmcp.Budgets.RouterToolsListBytes {
		t.Errorf("router tools/list is %d bytes, over its budget of %d (budgets.router_tools_list_bytes)", router, genmcp.Budgets.RouterToolsListBytes)
	}
}

func TestListedToolsFollowTheRegistry(t *testing.T) {
	cs := connect(t, newFake(), false, "")
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]*mcp.Tool{}
	for _, tl := range res.Tools {
		got[tl.Name] = tl
	}
	for _, rt := range genmcp.Tools {
		tl, ok := got[rt.Name]
		if want := rt.Exposure == "default" && rt.OperationID != ""; ok != want {
			t.Errorf("%s listed=%v, want %v", rt.Name, ok, want)
			continue
		}
		for _, a := range rt.Aliases {
			if _, ok := got[a]; ok {
				t.Errorf("alias %s is listed", a)
			}
		}
		if !ok {
			continue
		}
		// Annotations are the registry's explicit table, every hint present.
		ann := mustJSON(tl.Annotations)
		for _, h := range []string{"readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"} {
			if !bytes.Contains(ann, []byte(`"`+h+`"`)) {
				t.Errorf("%s: annotation %s missing in %s", rt.Name, h, ann)
			}
		}
		a := tl.Annotations
		if a.ReadOnlyHint != rt.Annotations.ReadOnlyHint || *a.DestructiveHint != rt.Annotations.DestructiveHint ||
			a.IdempotentHint != rt.Annotations.IdempotentHint || *a.OpenWorldHint != rt.Annotations.OpenWorldHint {
			t.Errorf("%s: annotations %s differ from the registry", rt.Name, ann)
		}
		// Inputs closed, outputs open (and admitting the error object).
		op := genmcp.Operations[rt.OperationID]
		closed := map[string]any{}
		json.Unmarshal(op.InputSchema, &closed) //nolint:errcheck
		delete(closed, "$schema")
		if !bytes.Equal(mustJSON(tl.InputSchema), mustJSON(closed)) {
			t.Errorf("%s: advertised input schema is not the operation's closed input schema", rt.Name)
		}
		out := mustJSON(tl.OutputSchema)
		if !bytes.Contains(out, []byte(`"additionalProperties":true`)) || bytes.Contains(out, []byte(`"additionalProperties":false`)) {
			t.Errorf("%s: advertised output schema is not open: %s", rt.Name, out)
		}
	}
	if cs.InitializeResult().Instructions != genmcp.Server.Instructions {
		t.Errorf("instructions = %q", cs.InitializeResult().Instructions)
	}
}

func canonical(t *testing.T, raw json.RawMessage) []byte {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	return mustJSON(v)
}

func TestSuccessResultHasStructuredContentAndTextMirror(t *testing.T) {
	f := newFake()
	f.body["checkpoint_get"] = json.RawMessage(`{ "revision": "3",
		"checkpoint": {"note": "a<b & c>d"} }`)
	for _, version := range mcp.SupportedProtocolVersions() {
		t.Run(version, func(t *testing.T) {
			cs := connect(t, f, false, version)
			res := call(t, cs, "checkpoint_get", map[string]any{"box_key": "alpha"})
			if res.IsError {
				t.Fatalf("error result: %s", text(t, res))
			}
			want := `{"revision":"3","checkpoint":{"note":"a<b & c>d"}}`
			if got := text(t, res); got != want {
				t.Errorf("text mirror = %s, want the compact body %s", got, want)
			}
			if got := mustJSON(res.StructuredContent); !bytes.Equal(got, canonical(t, json.RawMessage(want))) {
				t.Errorf("structuredContent = %s, want %s", got, want)
			}
		})
	}
}

func TestErrorResultShape(t *testing.T) {
	f := newFake()
	f.fail["checkpoint_save"] = apierr.Conflict(7)
	cs := connect(t, f, false, "")
	res := call(t, cs, "checkpoint_save", map[string]any{"box_key": "alpha", "expected_revision": "1", "checkpoint": map[string]any{}, "idempotency_key": "k1"})
	e := toolError(t, res)
	if e["code"] != "REVISION_CONFLICT" || e["current_revision"] != "7" || e["retryable"] != false {
		t.Errorf("error = %v", e)
	}
	summary := text(t, res)
	if strings.Contains(summary, "\n") || !strings.HasPrefix(summary, "REVISION_CONFLICT: ") || !strings.Contains(summary, "current_revision 7") {
		t.Errorf("summary = %q", summary)
	}
}

func TestArgumentsAreCheckedByOurCode(t *testing.T) {
	f := newFake()
	cs := connect(t, f, false, "")
	cases := []struct {
		name   string
		args   any
		code   string
		field  string
		reason string
	}{
		{"unknown field", map[string]any{"box_key": "alpha", "extra": 1}, "INVALID_ARGUMENT", "extra", "unknown_field"},
		{"wrong type", map[string]any{"box_key": "alpha", "known_checkpoint_revision": 3}, "INVALID_ARGUMENT", "known_checkpoint_revision", ""},
		{"missing box_key", map[string]any{}, "INVALID_ARGUMENT", "box_key", ""},
		{"no arguments", nil, "INVALID_ARGUMENT", "box_key", ""},
		{"another box", map[string]any{"box_key": "beta"}, "AUTH_FAILED", "", ""},
		{"another box and an unknown field", map[string]any{"box_key": "beta", "extra": 1}, "AUTH_FAILED", "", ""},
		{"box_key not a string", map[string]any{"box_key": 7}, "INVALID_ARGUMENT", "box_key", ""},
		{"box_key null", map[string]any{"box_key": nil}, "INVALID_ARGUMENT", "box_key", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := toolError(t, call(t, cs, "agent_prime", c.args))
			if e["code"] != c.code || str(e["field"]) != c.field || str(e["reason"]) != c.reason {
				t.Errorf("error = %v, want code %s field %q reason %q", e, c.code, c.field, c.reason)
			}
		})
	}
	if calls := f.called(); len(calls) != 0 {
		t.Errorf("rejected calls reached the backend: %v", calls)
	}
}

func str(v any) string { s, _ := v.(string); return s }

func TestUnknownToolIsAProtocolError(t *testing.T) {
	cs := connect(t, newFake(), false, "")
	_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "no_such_tool", Arguments: map[string]any{}})
	if err == nil || !strings.Contains(err.Error(), "no such tool") || strings.Contains(err.Error(), "no_such_tool") {
		t.Fatalf("err = %v, want a JSON-RPC unknown tool error", err)
	}
}

func TestAliasesAreCalledButNeverListed(t *testing.T) {
	var aliases [][2]string // alias, canonical
	for _, rt := range genmcp.Tools {
		if rt.OperationID != "" && rt.Exposure == "default" {
			for _, a := range rt.Aliases {
				aliases = append(aliases, [2]string{a, rt.Name})
			}
		}
	}
	if len(aliases) == 0 {
		t.Fatal("the registry declares no alias of a served tool (SPEC §13.1 lists rooms_list, requests_list, file_reports_list)")
	}
	f := newFake()
	cs := connect(t, f, false, "")
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, tl := range res.Tools {
		names[tl.Name] = true
	}
	for _, a := range aliases {
		if names[a[0]] {
			t.Errorf("alias %s is listed", a[0])
		}
		r := call(t, cs, a[0], map[string]any{"box_key": "beta"})
		if e := toolError(t, r); e["code"] != "AUTH_FAILED" {
			t.Errorf("%s: %v", a[0], e)
		}
	}
}

// rawServer serves b over the SDK's stateless streamable HTTP handler, for requests a
// client SDK cannot produce (invalid UTF-8, lone surrogates, broken JSON-RPC).
func rawServer(t *testing.T, b mcpserver.Backend) string {
	s := mcpserver.New(b, mcpserver.Options{})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}

func post(t *testing.T, url string, body []byte) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest("POST", url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var m map[string]any
	json.Unmarshal(raw, &m) //nolint:errcheck
	return resp.StatusCode, m
}

func TestRawArguments(t *testing.T) {
	f := newFake()
	url := rawServer(t, f)
	callBody := func(args string) []byte {
		return []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"agent_prime","arguments":` + args + `}}`)
	}
	for _, c := range []struct{ name, args, field string }{
		{"invalid UTF-8", "{\"box_key\":\"alpha\",\"known_checkpoint_revision\":\"1\xff\"}", "known_checkpoint_revision"},
		{"lone surrogate", `{"box_key":"alpha","known_checkpoint_revision":"\ud800"}`, "known_checkpoint_revision"},
		{"NUL", `{"box_key":"alpha","known_checkpoint_revision":"\u0000"}`, "known_checkpoint_revision"},
		{"not an object", `["alpha"]`, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			status, m := post(t, url, callBody(c.args))
			res, _ := m["result"].(map[string]any)
			if status != 200 || res == nil || res["isError"] != true {
				t.Fatalf("status %d, answer %v: want an isError result", status, m)
			}
			e := res["structuredContent"].(map[string]any)["error"].(map[string]any)
			if e["code"] != "INVALID_ARGUMENT" || str(e["field"]) != c.field {
				t.Errorf("error = %v", e)
			}
		})
	}
	t.Run("malformed JSON-RPC", func(t *testing.T) {
		status, m := post(t, url, []byte(`{"jsonrpc":"2.0","id":1,"method":`))
		if status == 200 && m["error"] == nil {
			t.Fatalf("status %d, answer %v: want a protocol error", status, m)
		}
	})
	t.Run("unknown tool", func(t *testing.T) {
		_, m := post(t, url, []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"nope_zzmarker","arguments":{}}}`))
		e, _ := m["error"].(map[string]any)
		if e == nil || e["code"] != float64(-32602) {
			t.Fatalf("answer %v: want JSON-RPC error -32602", m)
		}
		// A model reads that the tool does not exist (not that its arguments are wrong), never its name.
		if msg, _ := e["message"].(string); !strings.Contains(msg, "no such tool") || strings.Contains(msg, "zzmarker") {
			t.Errorf("message %q", msg)
		}
	})
	if calls := f.called(); len(calls) != 0 {
		t.Errorf("rejected calls reached the backend: %v", calls)
	}
}

// lineDiff is a small line diff (longest common subsequence) for the snapshot failure.
func lineDiff(a, b string) string {
	x, y := strings.Split(a, "\n"), strings.Split(b, "\n")
	n, m := len(x), len(y)
	lcs := make([][]int, n+1)
	for i := range lcs {
		lcs[i] = make([]int, m+1)
	}
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if x[i] == y[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var out strings.Builder
	shown := 0
	for i, j := 0, 0; (i < n || j < m) && shown < 200; {
		switch {
		case i < n && j < m && x[i] == y[j]:
			i, j = i+1, j+1
		case j < m && (i == n || lcs[i][j+1] >= lcs[i+1][j]):
			fmt.Fprintf(&out, "+%5d %s\n", j+1, y[j])
			j, shown = j+1, shown+1
		default:
			fmt.Fprintf(&out, "-%5d %s\n", i+1, x[i])
			i, shown = i+1, shown+1
		}
	}
	return out.String()
}

func TestRouterMode(t *testing.T) {
	f := newFake()
	f.body["checkpoint_get"] = json.RawMessage(`{"revision":"2","checkpoint":{"step":3}}`)
	cs := connect(t, f, true, "")
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range res.Tools {
		names = append(names, tl.Name)
	}
	if strings.Join(names, ",") != "agent_prime,tool_describe,tool_execute,tool_search" {
		t.Fatalf("router tools/list = %v", names)
	}

	// tool_execute runs any registry tool through the backend, by name or alias.
	r := call(t, cs, "tool_execute", map[string]any{"box_key": "alpha", "name": "checkpoint_get", "arguments": map[string]any{}})
	if r.IsError || text(t, r) != `{"result":{"revision":"2","checkpoint":{"step":3}}}` {
		t.Fatalf("tool_execute checkpoint_get: %s", text(t, r))
	}
	for _, rt := range genmcp.Tools {
		for _, a := range rt.Aliases {
			if rt.OperationID == "" {
				continue
			}
			if r := call(t, cs, "execute_tool", map[string]any{"box_key": "alpha", "name": a, "arguments": map[string]any{"box_key": "beta"}}); toolError(t, r)["code"] != "AUTH_FAILED" {
				t.Errorf("execute alias %s in another box: %s", a, text(t, r))
			}
		}
	}
	before := len(f.called())
	for _, c := range []struct {
		name  string
		args  map[string]any
		code  string
		field string
	}{
		{"recursion", map[string]any{"box_key": "alpha", "name": "tool_execute", "arguments": map[string]any{}}, "INVALID_ARGUMENT", "name"},
		{"admin operation", map[string]any{"box_key": "alpha", "name": "admin_box_list", "arguments": map[string]any{}}, "INVALID_ARGUMENT", "name"},
		{"unknown tool", map[string]any{"box_key": "alpha", "name": "no_such_tool", "arguments": map[string]any{}}, "INVALID_ARGUMENT", "name"},
		{"invalid inner arguments", map[string]any{"box_key": "alpha", "name": "checkpoint_get", "arguments": map[string]any{"extra": 1}}, "INVALID_ARGUMENT", "arguments.extra"},
		{"inner argument over its maxLength", map[string]any{"box_key": "alpha", "name": "room_create", "arguments": map[string]any{"name": "n", "idempotency_key": strings.Repeat("k", 129)}}, "LIMIT_EXCEEDED", "arguments.idempotency_key"},
		{"inner box of another tenant", map[string]any{"box_key": "alpha", "name": "checkpoint_get", "arguments": map[string]any{"box_key": "beta"}}, "AUTH_FAILED", ""},
		{"outer box of another tenant", map[string]any{"box_key": "beta", "name": "checkpoint_get", "arguments": map[string]any{}}, "AUTH_FAILED", ""},
	} {
		e := toolError(t, call(t, cs, "tool_execute", c.args))
		if e["code"] != c.code || str(e["field"]) != c.field {
			t.Errorf("%s: %v, want %s field %q", c.name, e, c.code, c.field)
		}
	}
	if calls := f.called(); len(calls) != before {
		t.Errorf("refused executions reached the backend: %v", calls[before:])
	}
	// The executed tool's own errors (its limits, idempotency) name its fields under
	// "arguments" too, and the backend's error is not changed for anyone else.
	shared := apierr.TooLarge("body_md", "body_too_large", 16384)
	f.fail["message_send"] = shared
	send := map[string]any{"box_key": "alpha", "name": "message_send", "arguments": map[string]any{
		"destination": map[string]any{"kind": "dm", "recipient_agent_id": "00000000-0000-4000-8000-000000000001"}, "body_md": "x", "idempotency_key": "k"}}
	for range 2 {
		if e := toolError(t, call(t, cs, "tool_execute", send)); e["code"] != "LIMIT_EXCEEDED" || e["field"] != "arguments.body_md" {
			t.Errorf("an executed tool's limit: %v, want field arguments.body_md", e)
		}
	}
	if shared.Field != "body_md" {
		t.Errorf("the backend's error was changed: field %q", shared.Field)
	}

	// Only the four are callable directly.
	if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "checkpoint_get", Arguments: map[string]any{"box_key": "alpha"}}); err == nil {
		t.Error("router mode accepted a direct call of an unlisted tool")
	}

	// tool_describe gives the contract tools/list gives in the full mode, with the output
	// schema whole (tools/list advertises its top level only): the same top-level fields,
	// nested shapes present, open at every object node.
	full := connect(t, newFake(), false, "")
	fl, err := full.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range fl.Tools {
		d := call(t, cs, "describe_tool", map[string]any{"box_key": "alpha", "name": tl.Name})
		var got struct {
			Name         string          `json:"name"`
			Annotations  map[string]bool `json:"annotations"`
			InputSchema  any             `json:"input_schema"`
			OutputSchema any             `json:"output_schema"`
		}
		if err := json.Unmarshal([]byte(text(t, d)), &got); err != nil || got.Name != tl.Name {
			t.Fatalf("tool_describe %s: %s", tl.Name, text(t, d))
		}
		if !bytes.Equal(mustJSON(got.InputSchema), mustJSON(tl.InputSchema)) || got.Annotations["readOnlyHint"] != tl.Annotations.ReadOnlyHint {
			t.Errorf("tool_describe %s differs from tools/list", tl.Name)
		}
		described, advertised := mustJSON(got.OutputSchema), mustJSON(tl.OutputSchema)
		if !bytes.Equal(topLevel(t, described), topLevel(t, advertised)) {
			t.Errorf("tool_describe %s: top-level output fields differ from tools/list:\n%s\n%s", tl.Name, described, advertised)
		}
		if bytes.Contains(described, []byte(`"additionalProperties":false`)) {
			t.Errorf("tool_describe %s: a closed object node in the output schema", tl.Name)
		}
		if _, err := schema.Compile(tl.Name+".described", described); err != nil {
			t.Errorf("tool_describe %s: the output schema does not compile: %v", tl.Name, err)
		}
	}
	// The shape of an inbox row is there, down to its message's fields.
	d := call(t, cs, "tool_describe", map[string]any{"box_key": "alpha", "name": "inbox_list"})
	var described struct {
		OutputSchema struct {
			Properties struct {
				Items struct {
					Items struct {
						Properties map[string]struct {
							Properties map[string]any `json:"properties"`
						} `json:"properties"`
					} `json:"items"`
				} `json:"items"`
			} `json:"properties"`
		} `json:"output_schema"`
	}
	if err := json.Unmarshal([]byte(text(t, d)), &described); err != nil {
		t.Fatal(err)
	}
	row := described.OutputSchema.Properties.Items.Items.Properties
	if _, ok := row["inbox_seq"]; !ok || row["message"].Properties["body_md"] == nil {
		t.Errorf("tool_describe inbox_list: no inbox row shape: %s", text(t, d))
	}

	// tool_search ranks by the registry text.
	s := call(t, cs, "tool_search", map[string]any{"box_key": "alpha", "query": "save my checkpoint", "limit": 2})
	var found struct {
		Items []struct{ Name string } `json:"items"`
	}
	if err := json.Unmarshal([]byte(text(t, s)), &found); err != nil || len(found.Items) != 2 || found.Items[0].Name != "checkpoint_save" {
		t.Errorf("tool_search: %s", text(t, s))
	}
	// A query no tool matches finds nothing (not the first tools of the registry); a query
	// of no words lists every tool, up to the limit.
	none := call(t, cs, "tool_search", map[string]any{"box_key": "alpha", "query": "zzzqqqxx", "limit": 10})
	if err := json.Unmarshal([]byte(text(t, none)), &found); err != nil || len(found.Items) != 0 {
		t.Errorf("tool_search for a word no tool has: %s", text(t, none))
	}
	all := call(t, cs, "tool_search", map[string]any{"box_key": "alpha", "query": "  ", "limit": 3})
	if err := json.Unmarshal([]byte(text(t, all)), &found); err != nil || len(found.Items) != 3 {
		t.Errorf("tool_search for no word: %s", text(t, all))
	}

	// The full mode has no router tools.
	if _, err := full.CallTool(context.Background(), &mcp.CallToolParams{Name: "tool_execute", Arguments: map[string]any{}}); err == nil {
		t.Error("the full mode accepted tool_execute")
	}
}

// BenchmarkCall is one tools/call's own work around the Backend (argument checks, the
// result's shape; the fake backend answers {}): a message_send's arguments, valid as they
// stand.
func BenchmarkCall(b *testing.B) {
	f := newFake()
	f.body["message_send"] = json.RawMessage(`{}`)
	args := json.RawMessage(`{"box_key":"alpha","destination":{"kind":"dm","recipient_agent_id":"0195f2a4-3c1e-7b7c-9a55-2f1d2b3c4d5e"},"body_md":"` +
		strings.Repeat("A status line for the benchmark. ", 30) + `","idempotency_key":"bench-1"}`)
	_, calls := mcpserver.Build(f, mcpserver.Options{Version: "bench"})
	b.ReportAllocs()
	for b.Loop() {
		req := &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: "message_send", Arguments: args}}
		if res, err := calls.Call(context.Background(), req); err != nil || res.IsError {
			b.Fatal(err, res)
		}
	}
}

// topLevel is an output schema's top-level field names and types, for comparing a described
// schema with the advertised one.
func topLevel(t *testing.T, doc []byte) []byte {
	t.Helper()
	var s struct {
		Properties map[string]struct {
			Type any `json:"type"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(doc, &s); err != nil {
		t.Fatal(err)
	}
	return mustJSON(s.Properties)
}
