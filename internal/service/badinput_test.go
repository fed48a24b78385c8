package service_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"testing"

	genmcp "github.com/agentbox/agentbox/gen/mcp"
	"github.com/agentbox/agentbox/internal/testenv"
)

// marker is in every rejected value; it must never appear in a response.
const marker = "MRKxq7"

// badText is a rejected string as raw JSON (for bodies and MCP arguments) and as a
// percent-encoded URL component (for paths and query strings).
type badText struct {
	name     string
	json     string // a JSON string literal
	urlValue string // already percent-encoded
}

var badTexts = []badText{
	{"NUL", `"` + marker + `\u0000"`, marker + "%00"},
	{"invalid UTF-8", "\"" + marker + "\xff\"", marker + "%FF"},
	{"lone surrogate", `"` + marker + `\ud800"`, marker + "%ED%A0%80"}, // CESU-8 surrogate bytes in a URL
}

// adminState is every row an admin operation could write, for "nothing written".
func adminState(t *testing.T, e *testenv.Env) string {
	t.Helper()
	var b strings.Builder
	for _, table := range []string{"boxes", "hosts", "api_keys", "admin_tokens",
		"(SELECT agent_id, name, enabled, listed, role, description, card_revision, profile_version FROM agents)"} {
		var s string
		if err := e.Store.Pool().QueryRow(context.Background(), `SELECT coalesce(string_agg(t::text, E'\n' ORDER BY t::text), '') FROM `+table+` t`).Scan(&s); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%s\n%s\n", table, s)
	}
	return b.String()
}

// raw sends a request with a raw (already encoded) path and body.
func raw(t *testing.T, e *testenv.Env, method, rawPath, bearer, contentType string, body []byte, headers map[string]string) testenv.Response {
	t.Helper()
	req, err := http.NewRequest(method, e.URL+"/", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(e.URL + rawPath)
	if err != nil {
		t.Fatalf("%s: %v", rawPath, err)
	}
	req.URL = u
	if body == nil {
		req.Body = nil
		req.ContentLength = 0
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, rawPath, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return testenv.Response{Status: resp.StatusCode, Raw: b, Header: resp.Header}
}

// mcpCall posts one raw JSON-RPC request to /mcp.
func mcpCall(t *testing.T, e *testenv.Env, key string, body []byte) (int, map[string]any, []byte) {
	t.Helper()
	r := raw(t, e, "POST", "/mcp", key, "application/json", body, map[string]string{
		"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-06-18"})
	var m map[string]any
	json.Unmarshal(r.Raw, &m) //nolint:errcheck
	return r.Status, m, r.Raw
}

// mcpToolCall sends tools/call of tool with raw JSON arguments and returns whether the
// result is a tool error, its structuredContent and the raw answer.
func mcpToolCall(t *testing.T, e *testenv.Env, key, tool, arguments string) (isError bool, content map[string]any, rawResp []byte) {
	t.Helper()
	_, m, rawResp := mcpCall(t, e, key, []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"`+tool+`","arguments":`+arguments+`}}`))
	res, _ := m["result"].(map[string]any)
	content, _ = res["structuredContent"].(map[string]any)
	return res["isError"] == true, content, rawResp
}

func fillPath(op *genmcp.Operation, box, target, value string) string {
	p := op.Path
	for _, name := range op.PathParams {
		v := "x"
		if strings.HasSuffix(name, "_id") { // a path UUID is checked first (SPEC §9): the others must be well formed
			v = "00000000-0000-4000-8000-000000000000"
		}
		switch {
		case name == target:
			v = value
		case name == "box_key":
			v = box
		}
		p = strings.ReplaceAll(p, "{"+name+"}", v)
	}
	return p
}

func sortedOps() []*genmcp.Operation {
	var ops []*genmcp.Operation
	for _, op := range genmcp.Operations {
		ops = append(ops, op)
	}
	sort.Slice(ops, func(i, j int) bool { return ops[i].OperationID < ops[j].OperationID })
	return ops
}

func jsonBody(op *genmcp.Operation) bool {
	for _, mt := range op.MediaTypes {
		if mt == "application/json" {
			return op.Body != nil
		}
	}
	return false
}

// The bad-input table (SPEC §12): for every operation, over HTTP and over MCP, every string
// input — path segment, query parameter, body field, nested payload/checkpoint/patch/file
// values and keys — holding NUL, invalid UTF-8 or a lone surrogate is INVALID_ARGUMENT naming
// the field (reason invalid_text); a bad path box_key is AUTH_FAILED. No 5xx, the rejected
// value never appears in the answer, nothing is written. Finding 3 of issue 11.
func TestBadInputTable(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "a", "b")
	e, a := w.e, w.agents["a"]
	beforeAgent, beforeAdmin := dbState(t, e), adminState(t, e)
	authFailed := raw(t, e, "GET", "/api/v1/boxes/alpha/me", "abk_not-a-key", "", nil, nil).Raw

	cases := 0
	check := func(what string, r testenv.Response, status int, code, reason, field string) {
		t.Helper()
		cases++
		if r.Status >= 500 || r.Status != status || r.Code() != code || r.ErrorField("reason") != reason || r.ErrorField("field") != field {
			t.Errorf("%s: want %d %s/%s field %q, got %d %s", what, status, code, reason, field, r.Status, r.Raw)
		}
		if bytes.Contains(r.Raw, []byte(marker)) {
			t.Errorf("%s: the rejected value is echoed: %s", what, r.Raw)
		}
	}
	for _, op := range sortedOps() {
		bearer, box := a.Key, "alpha"
		if op.Admin {
			bearer = testenv.AdminToken
		}
		for _, bad := range badTexts {
			for _, name := range op.PathParams {
				r := raw(t, e, op.Method, fillPath(op, box, name, bad.urlValue), bearer, "", nil, nil)
				what := fmt.Sprintf("HTTP %s path %s %s", op.OperationID, name, bad.name)
				if name == "box_key" && !op.Admin {
					check(what, r, 401, "AUTH_FAILED", "", "")
					if !bytes.Equal(bytes.TrimSpace(r.Raw), bytes.TrimSpace(authFailed)) {
						t.Errorf("%s: not the one AUTH_FAILED body: %s", what, r.Raw)
					}
					continue
				}
				check(what, r, 400, "INVALID_ARGUMENT", "invalid_text", name)
			}
			for _, name := range op.QueryParams {
				r := raw(t, e, op.Method, fillPath(op, box, "", "")+"?"+name+"="+bad.urlValue, bearer, "", nil, nil)
				check(fmt.Sprintf("HTTP %s query %s %s", op.OperationID, name, bad.name), r, 400, "INVALID_ARGUMENT", "invalid_text", name)
			}
			if !jsonBody(op) {
				continue
			}
			fields := op.BodyFields
			if op.BodyArg != "" {
				fields = nil
				r := raw(t, e, op.Method, fillPath(op, box, "", ""), bearer, "application/json", []byte(`[`+bad.json+`]`), nil)
				check(fmt.Sprintf("HTTP %s body %s", op.OperationID, bad.name), r, 400, "INVALID_ARGUMENT", "invalid_text", "[0]")
			}
			for _, name := range fields {
				body := []byte(`{"` + name + `":` + bad.json + `}`)
				r := raw(t, e, op.Method, fillPath(op, box, "", ""), bearer, "application/json", body, nil)
				check(fmt.Sprintf("HTTP %s body %s %s", op.OperationID, name, bad.name), r, 400, "INVALID_ARGUMENT", "invalid_text", name)
			}
		}
	}
	// Per operation, beyond text: a malformed JSON body, an undeclared media type, and a
	// malformed value in each path segment (4xx, never echoed, never 5xx).
	loose := func(what string, r testenv.Response) {
		t.Helper()
		cases++
		if r.Status < 400 || r.Status >= 500 || r.Code() == "" {
			t.Errorf("%s: want a 4xx with the error body, got %d %s", what, r.Status, r.Raw)
		}
		if bytes.Contains(r.Raw, []byte(marker)) {
			t.Errorf("%s: the rejected value is echoed: %s", what, r.Raw)
		}
	}
	for _, op := range sortedOps() {
		bearer := a.Key
		if op.Admin {
			bearer = testenv.AdminToken
		}
		for _, name := range op.PathParams {
			if name == "box_key" && !op.Admin {
				continue
			}
			loose(fmt.Sprintf("HTTP %s path %s malformed", op.OperationID, name),
				raw(t, e, op.Method, fillPath(op, "alpha", name, marker+"-%2F..%20x"), bearer, "", nil, nil))
		}
		if !jsonBody(op) {
			continue
		}
		r := raw(t, e, op.Method, fillPath(op, "alpha", "", ""), bearer, "application/json", []byte(`{"a":"`+marker), nil)
		check(fmt.Sprintf("HTTP %s malformed JSON", op.OperationID), r, 400, "INVALID_ARGUMENT", "", "")
		r = raw(t, e, op.Method, fillPath(op, "alpha", "", ""), bearer, "text/plain", []byte(`{"a":"`+marker+`"}`), nil)
		check(fmt.Sprintf("HTTP %s text/plain", op.OperationID), r, 415, "INVALID_ARGUMENT", "unsupported_media_type", "")
		for _, mt := range op.MediaTypes { // the suggestion names every media type the operation declares
			if !strings.Contains(r.ErrorField("suggested_action"), mt) {
				t.Errorf("HTTP %s text/plain: the suggestion %q does not name %s", op.OperationID, r.ErrorField("suggested_action"), mt)
			}
		}
	}

	// Nested values and keys, where payloads and documents keep their own rules.
	nested := []struct {
		method, path, body, field string
	}{
		{"POST", "/messages", `{"payload":{"note":BAD}}`, "payload.note"},
		{"POST", "/messages", `{"payload":{BAD:1}}`, "payload"},
		{"POST", "/messages", `{"payload":{"list":[1,{"deep":BAD}]}}`, "payload.list[1].deep"},
		{"POST", "/messages", `{"files":[{"url":BAD}]}`, "files[0].url"},
		{"POST", "/messages", `{"files":[{"url":"https://example.com/a","display_name":BAD}]}`, "files[0].display_name"},
		{"POST", "/messages", `{"destination":{"kind":BAD}}`, "destination.kind"},
		{"PUT", "/checkpoint", `{"checkpoint":{"k":BAD}}`, "checkpoint.k"},
		{"PUT", "/checkpoint", `{"checkpoint":{BAD:true}}`, "checkpoint"},
		{"PATCH", "/directory/self", `{"patch":{"role":BAD}}`, "patch.role"},
	}
	for _, bad := range badTexts {
		for _, n := range nested {
			r := raw(t, e, n.method, "/api/v1/boxes/alpha"+n.path, a.Key, "application/json", []byte(strings.ReplaceAll(n.body, "BAD", bad.json)), nil)
			check(fmt.Sprintf("HTTP %s %s %s", n.method, n.path, bad.name), r, 400, "INVALID_ARGUMENT", "invalid_text", n.field)
		}
	}
	// Headers the contract declares.
	r := raw(t, e, "POST", "/api/v1/boxes/alpha/prime", a.Key, "application/json", []byte(`{}`), map[string]string{"Agentbox-Session": marker + "\xff"})
	check("HTTP Agentbox-Session header", r, 400, "INVALID_ARGUMENT", "", "Agentbox-Session")

	// MCP: every served tool, every input field.
	mcpCases := 0
	for _, tool := range genmcp.Tools {
		op := genmcp.Operations[tool.OperationID]
		if op == nil || tool.Exposure != "default" {
			continue
		}
		var sch struct {
			Properties map[string]json.RawMessage `json:"properties"`
		}
		json.Unmarshal(op.InputSchema, &sch) //nolint:errcheck
		names := make([]string, 0, len(sch.Properties))
		for n := range sch.Properties {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, bad := range badTexts {
			for _, name := range names {
				args := `{"box_key":"alpha","` + name + `":` + bad.json + `}`
				if name == "box_key" {
					args = `{"box_key":` + bad.json + `}`
				}
				body := []byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"` + tool.Name + `","arguments":` + args + `}}`)
				status, m, rawBody := mcpCall(t, e, a.Key, body)
				cases++
				mcpCases++
				what := fmt.Sprintf("MCP %s %s %s", tool.Name, name, bad.name)
				res, _ := m["result"].(map[string]any)
				if status != 200 || res == nil || res["isError"] != true {
					t.Errorf("%s: want an isError result, got %d %s", what, status, rawBody)
					continue
				}
				sc, _ := res["structuredContent"].(map[string]any)
				er, _ := sc["error"].(map[string]any)
				if er["code"] != "INVALID_ARGUMENT" || er["field"] != name || er["reason"] != "invalid_text" {
					t.Errorf("%s: want INVALID_ARGUMENT invalid_text field %s, got %s", what, name, rawBody)
				}
				if bytes.Contains(rawBody, []byte(marker)) {
					t.Errorf("%s: the rejected value is echoed: %s", what, rawBody)
				}
			}
		}
	}
	if after := dbState(t, e); after != beforeAgent {
		t.Errorf("the bad-input table wrote agent data:\n%s\n%s", beforeAgent, after)
	}
	if after := adminState(t, e); after != beforeAdmin {
		t.Errorf("the bad-input table wrote admin data:\n%s\n%s", beforeAdmin, after)
	}
	if cases < 400 || mcpCases == 0 {
		t.Fatalf("the table ran %d cases (%d over MCP); want at least 400", cases, mcpCases)
	}
	t.Logf("bad-input table: %d cases (%d over MCP), none 5xx, none echoed, nothing written", cases, mcpCases)
}

// A body naming a member twice is refused, not read as its last value (SPEC §1: bodies are
// parsed strictly), over HTTP and MCP alike: INVALID_ARGUMENT reason duplicate_key naming
// the member (a declared one; a free-form object's member only when its name reads as a
// name), and nothing is written.
func TestDuplicateMemberNamesAreRefused(t *testing.T) {
	t.Parallel()
	e := testenv.New(t)
	e.Box("alpha")
	a := e.NewAgent("alpha", "ann", nil)
	a.Prime()
	state := func() int64 {
		return dbInt(t, e, `SELECT (SELECT count(*) FROM checkpoints WHERE revision > 0) + (SELECT count(*) FROM idempotency_records)`)
	}
	before := state()
	for _, c := range []struct{ body, field string }{
		{`{"expected_revision":"0","checkpoint":{},"checkpoint":{"x":1},"idempotency_key":"k1"}`, "checkpoint"},
		{`{"expected_revision":"0","checkpoint":{"step":1,"step":2},"idempotency_key":"k2"}`, "checkpoint.step"},
		{`{"expected_revision":"0","checkpoint":{"a b":1,"a b":2},"idempotency_key":"k3"}`, "checkpoint"},
	} {
		r := raw(t, e, "PUT", "/api/v1/boxes/alpha/checkpoint", a.Key, "application/json", []byte(c.body), nil)
		if r.Status != http.StatusBadRequest || r.Code() != "INVALID_ARGUMENT" || r.ErrorField("reason") != "duplicate_key" || r.ErrorField("field") != c.field {
			t.Errorf("HTTP %s: %d %s, want INVALID_ARGUMENT duplicate_key at %q", c.body, r.Status, r.Raw, c.field)
		}
		isError, sc, rawResp := mcpToolCall(t, e, a.Key, "checkpoint_save", strings.Replace(c.body, `{`, `{"box_key":"alpha",`, 1))
		ee, _ := sc["error"].(map[string]any)
		if !isError || ee["reason"] != "duplicate_key" || ee["field"] != c.field {
			t.Errorf("MCP %s: %s, want a tool error duplicate_key at %q", c.body, rawResp, c.field)
		}
	}
	if after := state(); after != before {
		t.Fatalf("a refused body was written: %d rows before, %d after", before, after)
	}
}

// limit is clamped, never rejected (SPEC §9), and so is lease_seconds (§7), whatever way an
// integer is written: with a fraction or an exponent (10.0, 1e2) or beyond 64 bits — in a
// query string, a JSON body and MCP arguments alike. A value that is not an integer
// (10.5) is still INVALID_ARGUMENT.
func TestClampedIntegersAreNeverRejected(t *testing.T) {
	t.Parallel()
	e := testenv.New(t)
	e.Box("alpha")
	a := e.NewAgent("alpha", "ann", nil)
	b := e.NewAgent("alpha", "bob", nil)
	a.Prime()
	b.Prime()
	for i := range 3 {
		ibSend(t, a, dmTo(b), fmt.Sprintf("m%d", i), nil)
	}
	items := func(r testenv.Response) int {
		t.Helper()
		its, ok := r.JSON()["items"].([]any)
		if r.Status != http.StatusOK || !ok {
			t.Fatalf("%d %s", r.Status, r.Raw)
		}
		return len(its)
	}
	for q, want := range map[string]int{"1e0": 1, "2.0": 2, "99999999999999999999": 3, "-99999999999999999999": 1, "1e400": 3} {
		if n := items(b.Call("GET", "/inbox?limit="+url.QueryEscape(q), nil)); n != want {
			t.Errorf("GET /inbox?limit=%s: %d items, want %d", q, n, want)
		}
	}
	if r := b.Call("GET", "/inbox?limit=1.5", nil); r.Status != http.StatusBadRequest || r.Code() != "INVALID_ARGUMENT" {
		t.Errorf("limit=1.5: %d %s, want INVALID_ARGUMENT", r.Status, r.Raw)
	}
	claim := func(body string) testenv.Response {
		return raw(t, e, "POST", "/api/v1/boxes/alpha/inbox/claim", b.Key, "application/json", []byte(body), nil)
	}
	if n := items(claim(`{"limit":1.0e0,"lease_seconds":1e30,"idempotency_key":"c1"}`)); n != 1 {
		t.Errorf("claim limit 1.0e0: %d items, want 1", n)
	}
	if r := claim(`{"limit":1.5,"idempotency_key":"c2"}`); r.Code() != "INVALID_ARGUMENT" {
		t.Errorf("claim limit 1.5: %d %s, want INVALID_ARGUMENT", r.Status, r.Raw)
	}
	isError, sc, rawResp := mcpToolCall(t, e, b.Key, "inbox_list", `{"box_key":"alpha","limit":99999999999999999999}`)
	if its, ok := sc["items"].([]any); isError || !ok || len(its) != 3 {
		t.Errorf("MCP inbox_list limit 99999999999999999999: %s", rawResp)
	}
}
