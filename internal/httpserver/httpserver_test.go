package httpserver_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/server"
	"github.com/agentbox/agentbox/internal/testenv"
	"github.com/agentbox/agentbox/spec"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func TestServiceEndpoints(t *testing.T) {
	t.Parallel()
	e := testenv.New(t)
	if r := e.Do("GET", "/healthz", "", nil, nil); r.Status != http.StatusOK {
		t.Fatalf("healthz: %d", r.Status)
	}
	if r := e.Do("GET", "/readyz", "", nil, nil); r.Status != http.StatusOK || !strings.Contains(string(r.Raw), "ready") {
		t.Fatalf("readyz: %d %s", r.Status, r.Raw)
	}
	if r := e.Do("GET", "/openapi.json", "", nil, nil); r.Status != http.StatusOK || !bytes.Equal(r.Raw, spec.OpenAPI) {
		t.Fatalf("openapi.json: %d (%d bytes)", r.Status, len(r.Raw))
	}
	e.Box("alpha")
	a := e.NewAgent("alpha", "a", nil)
	a.Call("GET", "/checkpoint", nil) // NOT_PRIMED, counted with its status and its code
	// A key that has acted is checked inside the call's first round trip; its refusal after
	// a revocation is counted as what the caller got.
	b := e.NewAgent("alpha", "b", nil)
	b.Prime()
	e.Admin("POST", "/boxes/alpha/keys/"+b.KeyID+"/revoke", nil)
	if r := b.Call("GET", "/checkpoint", nil); r.Status != http.StatusUnauthorized {
		t.Fatalf("a revoked key: %d %s", r.Status, r.Raw)
	}
	r := e.Do("GET", "/metrics", "", nil, nil)
	for _, want := range []string{
		`agentbox_requests_total{operation="checkpoint_get",transport="http",status="409"} 1`,
		`agentbox_request_errors_total{operation="checkpoint_get",transport="http",code="NOT_PRIMED"} 1`,
		`agentbox_requests_total{operation="checkpoint_get",transport="http",status="401"} 1`,
		`agentbox_request_errors_total{operation="checkpoint_get",transport="http",code="AUTH_FAILED"} 1`,
		`agentbox_requests_total{operation="admin_agent_create",transport="http",status="200"} 2`,
		`agentbox_request_duration_seconds_count{operation="checkpoint_get"} 2`,
		`agentbox_db_pool_connections{state="max"}`,
	} {
		if !strings.Contains(string(r.Raw), want) {
			t.Errorf("metrics lack %q:\n%s", want, r.Raw)
		}
	}
}

// Unknown routes answer with the error envelope, never a bare text page.
func TestUnknownRouteIsStructured(t *testing.T) {
	t.Parallel()
	e := testenv.New(t)
	r := e.Do("GET", "/api/v1/nothing-here", "", nil, nil)
	if r.Status != http.StatusNotFound || r.Code() != "NOT_FOUND_OR_FORBIDDEN" {
		t.Fatalf("%d %s", r.Status, r.Raw)
	}
}

// A path served under other methods answers 405 with the Allow header and the error
// envelope (ServeMux's own 405 is masked by the catch-all route), before authentication and
// writing nothing; a path nobody serves stays 404.
func TestWrongMethodIs405WithAllow(t *testing.T) {
	t.Parallel()
	e, _, b, _ := dmWorld(t)
	b.Prime()
	messages := func() (n int) {
		if err := e.Store.Pool().QueryRow(t.Context(), `SELECT count(*) FROM messages`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := messages()
	for _, c := range []struct{ method, path, key, allow string }{
		{"DELETE", "/api/v1/boxes/alpha/messages", b.Key, "POST"},
		{"PUT", "/api/v1/boxes/alpha/messages", "", "POST"},
		{"POST", "/api/v1/boxes/alpha/inbox", b.Key, "GET"},
		{"DELETE", "/api/v1/boxes/alpha/checkpoint", b.Key, "GET, PUT"},
		{"OPTIONS", "/api/v1/boxes/no-such-box/limits", "", "GET"},
		{"POST", "/healthz", "", "GET"},
		{"DELETE", "/admin/api/v1/boxes", testenv.AdminToken, "GET, POST"},
		{"PUT", "/admin/api/v1/boxes/alpha/settings", "", "GET, PATCH"},
	} {
		r := e.Do(c.method, c.path, c.key, map[string]any{"idempotency_key": "k1"}, nil)
		if r.Status != http.StatusMethodNotAllowed || r.Code() != "INVALID_ARGUMENT" || r.Header.Get("Allow") != c.allow ||
			!strings.Contains(string(r.Raw), `"reason":"method_not_allowed"`) {
			t.Errorf("%s %s: %d Allow %q %s", c.method, c.path, r.Status, r.Header.Get("Allow"), r.Raw)
		}
	}
	if n := messages(); n != before {
		t.Fatalf("a refused method wrote %d messages", n-before)
	}
	for _, path := range []string{"/api/v1/boxes/alpha/nothing-here", "/admin/api/v1/nothing-here"} {
		if r := e.Do("DELETE", path, b.Key, nil, nil); r.Status != http.StatusNotFound || r.Code() != "NOT_FOUND_OR_FORBIDDEN" || r.Header.Get("Allow") != "" {
			t.Fatalf("unknown path %s: %d Allow %q", path, r.Status, r.Header.Get("Allow"))
		}
	}
}

// /readyz reports unavailable when the database is not at the binary's schema version.
func TestReadyzFailsWhenSchemaIsBehind(t *testing.T) {
	t.Parallel()
	e := testenv.New(t)
	if _, err := e.Store.Pool().Exec(t.Context(), `DELETE FROM schema_migrations WHERE version = (SELECT max(version) FROM schema_migrations)`); err != nil {
		t.Fatal(err)
	}
	if r := e.Do("GET", "/readyz", "", nil, nil); r.Status != http.StatusServiceUnavailable {
		t.Fatalf("readyz: %d %s", r.Status, r.Raw)
	}
}

// /metrics is open by default (above) and requires its bearer token once one is configured.
func TestMetricsTokenWhenConfigured(t *testing.T) {
	t.Parallel()
	e := testenv.New(t)
	h := server.Handler(server.Config{Store: e.Store, Service: e.Service, AdminToken: testenv.AdminToken,
		Log: slog.New(slog.DiscardHandler), MetricsToken: "metrics-secret"})
	get := func(token string) int {
		req := httptest.NewRequest("GET", "/metrics", nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code
	}
	if got := get(""); got != http.StatusUnauthorized {
		t.Fatalf("without the token: %d", got)
	}
	if got := get("wrong"); got != http.StatusUnauthorized {
		t.Fatalf("wrong token: %d", got)
	}
	if got := get("metrics-secret"); got != http.StatusOK {
		t.Fatalf("with the token: %d", got)
	}
}

// A HEAD runs no operation: ServeMux would answer it with the route's GET handler, and
// inbox_list's GET records receipts, which would make a row never shown ACKable. On the APIs
// and /mcp HEAD is answered as an undeclared method (405 naming GET, or 404 on /mcp, which
// declares no method of its own; nothing recorded); /healthz,
// /readyz, the docs and the admin UI's pages still answer it.
func TestHeadRunsNoOperation(t *testing.T) {
	t.Parallel()
	e, _, b, _ := dmWorld(t)
	b.Prime()
	var receipts int
	count := func() int {
		if err := e.Store.Pool().QueryRow(t.Context(), `SELECT count(*) FROM receipts`).Scan(&receipts); err != nil {
			t.Fatal(err)
		}
		return receipts
	}
	for _, path := range []string{"/inbox", "/inbox?filter=all", "/checkpoint", "/me", "/limits"} {
		r := e.Do("HEAD", "/api/v1/boxes/alpha"+path, b.Key, nil, nil)
		if r.Status != http.StatusMethodNotAllowed || !strings.HasPrefix(r.Header.Get("Allow"), "GET") {
			t.Fatalf("HEAD %s: %d, Allow %q", path, r.Status, r.Header.Get("Allow"))
		}
	}
	if n := count(); n != 0 {
		t.Fatalf("HEAD recorded %d receipts", n)
	}
	var seq string
	if err := e.Store.Pool().QueryRow(t.Context(), `SELECT inbox_seq::text FROM attention`).Scan(&seq); err != nil {
		t.Fatal(err)
	}
	r := b.Call("POST", "/inbox/ack", map[string]any{"inbox_seqs": []string{seq}, "idempotency_key": "a1"})
	if r.Status != http.StatusBadRequest || !strings.Contains(string(r.Raw), "not_returned_to_session") {
		t.Fatalf("ack after HEAD: %d %s", r.Status, r.Raw)
	}
	for _, path := range []string{"/healthz", "/readyz", "/openapi.json", "/docs", "/admin/signin"} {
		if r := e.Do("HEAD", path, "", nil, nil); r.Status != http.StatusOK {
			t.Fatalf("HEAD %s: %d", path, r.Status)
		}
	}
	if r := e.Do("HEAD", "/admin/api/v1/boxes", testenv.AdminToken, nil, nil); r.Status != http.StatusMethodNotAllowed {
		t.Fatalf("HEAD /admin/api/v1/boxes: %d", r.Status)
	}
	if r := e.Do("HEAD", "/mcp", testenv.AdminToken, nil, nil); r.Status != http.StatusNotFound {
		t.Fatalf("HEAD /mcp: %d", r.Status)
	}
}

// A JSON integer the schema admits but an int64 cannot hold (1e3, 2^70) is INVALID_ARGUMENT
// naming its field, never the value, and nothing is written — except where the service
// clamps (limit, lease_seconds: SPEC §9, §7), which takes any integer however written.
func TestUndecodableIntegerNamesItsField(t *testing.T) {
	t.Parallel()
	e := testenv.New(t)
	e.Box("alpha")
	a := e.NewAgent("alpha", "a", nil)
	a.Prime()
	revision := func() string {
		return fmt.Sprint(e.Admin("GET", "/boxes/alpha/settings", nil)["settings_revision"])
	}
	before := revision()
	for _, c := range []struct{ body, field string }{
		{`{"settings":{"targets_max":2e1}}`, "settings.targets_max"},
		{`{"settings":{"targets_max":99999999999999999999}}`, "settings.targets_max"},
		{`{"settings":{"body_max_bytes":4096.0}}`, "settings.body_max_bytes"},
	} {
		r := e.Do("PATCH", "/admin/api/v1/boxes/alpha/settings", testenv.AdminToken, c.body, nil)
		if r.Status != http.StatusBadRequest || r.Code() != "INVALID_ARGUMENT" || r.ErrorField("field") != c.field ||
			strings.Contains(string(r.Raw), "9999") || strings.Contains(string(r.Raw), "2e1") {
			t.Fatalf("%s: %d %s", c.body, r.Status, r.Raw)
		}
	}
	if after := revision(); after != before {
		t.Fatalf("refused settings updates changed the revision: %s → %s", before, after)
	}
	// The clamped integers are taken however written.
	for _, body := range []string{
		`{"lease_seconds":1e3,"idempotency_key":"k1"}`,
		`{"lease_seconds":99999999999999999999,"idempotency_key":"k2"}`,
		`{"limit":12e1,"idempotency_key":"k3"}`,
	} {
		if r := e.Do("POST", "/api/v1/boxes/alpha/inbox/claim", a.Key, body, nil); r.Status != http.StatusOK {
			t.Fatalf("%s: %d %s", body, r.Status, r.Raw)
		}
	}
}

// A path UUID is checked as strictly as the uuid format checks one in a body (SPEC §9): the
// other spellings a parser takes ({…}, urn:uuid:, bare hex) are INVALID_ARGUMENT with the
// parameter's name. A query key the operation does not declare is refused as an unknown body
// field is: named when it reads as a name, never echoed otherwise.
func TestPathUUIDsStrictAndUnknownQueryKeysRefused(t *testing.T) {
	t.Parallel()
	_, a, _, id := dmWorld(t)
	if r := a.Call("GET", "/messages/"+id, nil); r.Status != http.StatusOK {
		t.Fatalf("canonical id: %d %s", r.Status, r.Raw)
	}
	for _, spelling := range []string{"urn:uuid:" + id, "%7B" + id + "%7D", strings.ReplaceAll(id, "-", ""), strings.ToUpper(id[:8]) + id[8:] + "0"} {
		r := a.Call("GET", "/messages/"+spelling, nil)
		if r.Status != http.StatusBadRequest || r.Code() != "INVALID_ARGUMENT" || r.ErrorField("field") != "message_id" {
			t.Fatalf("GET /messages/%s: %d %s", spelling, r.Status, r.Raw)
		}
	}
	// Named in field as an unknown body key is, when it reads as a name; otherwise (a
	// credential's shape, free text) refused without it.
	r := a.Call("GET", "/inbox?bogus_key=1", nil)
	if r.Status != http.StatusBadRequest || r.ErrorField("reason") != "unknown_field" || r.ErrorField("field") != "bogus_key" {
		t.Fatalf("unknown query key: %d %s", r.Status, r.Raw)
	}
	for _, key := range []string{"ghp_ZZMARKERZZ0123456789abcdefghijklmnopqrstuv", "ZZMARKERZZ%20secret", "abk_ZZMARKERZZ0123456789abcdefghijklmnopqr"} {
		r := a.Call("GET", "/inbox?"+key+"=1", nil)
		if r.Status != http.StatusBadRequest || r.ErrorField("reason") != "unknown_field" || r.ErrorField("field") != "" || strings.Contains(string(r.Raw), "ZZMARKERZZ") {
			t.Fatalf("unknown query key %q: %d %s", key, r.Status, r.Raw)
		}
	}
	if r := a.Call("GET", "/inbox?filter=all&limit=5", nil); r.Status != http.StatusOK {
		t.Fatalf("declared query keys: %d %s", r.Status, r.Raw)
	}
}

// dmWorld is a box whose primed agent a has sent one DM (message id) to agent b.
func dmWorld(t *testing.T) (e *testenv.Env, a, b *testenv.Agent, id string) {
	e = testenv.New(t)
	e.Box("alpha")
	a = e.NewAgent("alpha", "a", map[string]any{"listed": true})
	b = e.NewAgent("alpha", "b", nil)
	a.Prime()
	sent := a.MustCall("POST", "/messages", map[string]any{"destination": map[string]any{"kind": "dm", "recipient_agent_id": b.ID.String()}, "body_md": "hi", "idempotency_key": "k1"})
	return e, a, b, sent["message_id"].(string)
}

// Every 401 names its scheme (RFC 9110 §15.5.2): the agent API, the admin API and /mcp
// (where it also makes MCP clients report a bad key instead of starting OAuth, SPEC §13.2).
func TestUnauthorizedNamesBearer(t *testing.T) {
	t.Parallel()
	e, _, b, _ := dmWorld(t)
	for _, c := range []struct{ method, path, token string }{
		{"GET", "/api/v1/boxes/alpha/inbox", ""},
		{"GET", "/api/v1/boxes/alpha/inbox", b.Key[:len(b.Key)-1] + "x"},
		{"GET", "/admin/api/v1/boxes", "abadm_wrong"},
		{"POST", "/mcp", "abk_wrong"},
	} {
		r := e.Do(c.method, c.path, c.token, map[string]any{}, nil)
		if r.Status != http.StatusUnauthorized || r.Header.Get("WWW-Authenticate") != `Bearer realm="agentbox"` {
			t.Errorf("%s %s: %d WWW-Authenticate %q", c.method, c.path, r.Status, r.Header.Get("WWW-Authenticate"))
		}
	}
}

// The APIs' answers are one caller's data: no cache may keep them (Cache-Control: no-store),
// successes and errors alike; the public documents may be cached.
func TestAPIAnswersAreNotCached(t *testing.T) {
	t.Parallel()
	e, a, _, id := dmWorld(t)
	for _, r := range []testenv.Response{
		a.Call("GET", "/messages/"+id, nil),
		a.Call("GET", "/inbox?bogus_key=1", nil),
		e.Do("GET", "/admin/api/v1/boxes", testenv.AdminToken, nil, nil),
		e.Do("POST", "/mcp", "abk_wrong", map[string]any{}, nil),
	} {
		if r.Header.Get("Cache-Control") != "no-store" {
			t.Errorf("%d %s: Cache-Control %q", r.Status, r.Raw, r.Header.Get("Cache-Control"))
		}
	}
	if r := e.Do("GET", "/openapi.json", "", nil, nil); r.Header.Get("Cache-Control") == "no-store" {
		t.Error("/openapi.json is no-store")
	}
}

// A key that has acted and is then refused (revoked here) gets the answer a key never seen
// gets, header for header (SPEC §2: AUTH_FAILED leaks nothing; outside probe: its 401 lacked
// Cache-Control, which told a genuine, recently used key from garbage), on the HTTP API and
// on /mcp.
func TestRefusedKnownKeyLooksLikeAnUnknownKey(t *testing.T) {
	t.Parallel()
	e := testenv.New(t)
	e.Box("alpha")
	a := e.NewAgent("alpha", "a", nil)
	a.Prime()
	mcpCall := func(key string) testenv.Response {
		return e.Do("POST", "/mcp", key, map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
			map[string]string{"Accept": "application/json, text/event-stream", "Mcp-Protocol-Version": "2025-06-18"})
	}
	if r := mcpCall(a.Key); r.Status != http.StatusOK { // the key has acted on /mcp too
		t.Fatalf("tools/list: %d %s", r.Status, r.Raw)
	}
	e.Admin("POST", "/boxes/alpha/keys/"+a.KeyID+"/revoke", nil)
	headers := func(r testenv.Response) string {
		var names []string
		for k := range r.Header {
			if k != "Date" {
				names = append(names, k+"="+strings.Join(r.Header[k], ","))
			}
		}
		slices.Sort(names)
		return fmt.Sprintf("%d %s %s", r.Status, strings.Join(names, " "), r.Raw)
	}
	unknown := "abk_" + strings.Repeat("z", 40)
	for _, c := range []struct {
		what           string
		known, unknown testenv.Response
	}{
		{"HTTP", a.Call("GET", "/checkpoint", nil), e.Do("GET", "/api/v1/boxes/alpha/checkpoint", unknown, nil, nil)},
		{"MCP", mcpCall(a.Key), mcpCall(unknown)},
	} {
		if k, u := headers(c.known), headers(c.unknown); k != u {
			t.Errorf("%s: the revoked key's answer differs from an unknown key's:\n%s\n%s", c.what, k, u)
		}
	}
}

// A query string that is not URL encoding is said to be so, naming its parameter (outside
// probe: 'query=a%ZZ' was "required field missing", Go's parser having dropped the pair), and
// a session header of non-ASCII text is refused as such, not as too long.
func TestMalformedParametersAreNamedForWhatTheyAre(t *testing.T) {
	t.Parallel()
	e := testenv.New(t)
	e.Box("alpha")
	a := e.NewAgent("alpha", "a", nil)
	a.Prime()
	r := a.Call("GET", "/directory?query=a%ZZ", nil)
	if r.Code() != "INVALID_ARGUMENT" || r.ErrorField("field") != "query" || !strings.Contains(string(r.Raw), "URL encoding") || strings.Contains(string(r.Raw), "ZZ") {
		t.Fatalf("bad encoding: %d %s", r.Status, r.Raw)
	}
	r = a.WithSession(strings.Repeat("é", 100)).Call("GET", "/checkpoint", nil)
	if r.Code() != "INVALID_ARGUMENT" || r.ErrorField("field") != "Agentbox-Session" || !strings.Contains(string(r.Raw), "printable ASCII") {
		t.Fatalf("non-ASCII session header: %d %s", r.Status, r.Raw)
	}
}

// A body that stops arriving is given up after the idle timeout: INVALID_ARGUMENT
// body_timeout, nothing written, the connection closed; a body that keeps arriving, however
// slowly and however long in all, is read. (A stalled body held its connection and handler
// for ever: the server set only ReadHeaderTimeout.)
func TestStalledBodyTimesOut(t *testing.T) {
	t.Parallel()
	e, a, _, _ := dmWorld(t)
	const idle = 300 * time.Millisecond
	srv := httptest.NewServer(server.Handler(server.Config{Store: e.Store, Service: e.Service, AdminToken: testenv.AdminToken,
		Log: slog.New(slog.DiscardHandler), BodyIdleTimeout: idle}))
	t.Cleanup(srv.Close)
	// send writes the request head (declaring declared bytes) and then body in pieces, pause
	// apart, and reads the answer.
	send := func(declared int, body string, pieces int, pause time.Duration) (int, string) {
		t.Helper()
		conn, err := net.Dial("tcp", srv.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		conn.SetDeadline(time.Now().Add(20 * time.Second)) //nolint:errcheck
		fmt.Fprintf(conn, "PUT /api/v1/boxes/alpha/checkpoint HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n",
			a.Key, declared)
		step := (len(body) + pieces - 1) / pieces
		for i := 0; i < len(body); i += step {
			if _, err := conn.Write([]byte(body[i:min(i+step, len(body))])); err != nil {
				t.Fatal(err)
			}
			time.Sleep(pause)
		}
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(raw)
	}
	revision := func() (rev int) {
		e.Store.Pool().QueryRow(t.Context(), `SELECT COALESCE(max(revision), 0) FROM checkpoints`).Scan(&rev) //nolint:errcheck
		return rev
	}
	body := `{"expected_revision":"0","checkpoint":{"step":1},"idempotency_key":"slow-1"}`
	// Half the body, then nothing (the rest never comes).
	status, raw := send(len(body), body[:len(body)/2], 1, 0)
	if status != http.StatusBadRequest || !strings.Contains(raw, `"reason":"body_timeout"`) {
		t.Fatalf("stalled body: %d %s", status, raw)
	}
	if rev := revision(); rev != 0 {
		t.Fatalf("a stalled body wrote revision %d", rev)
	}
	// The whole body in 8 pieces, each within the idle timeout, over twice its length in all.
	if status, raw := send(len(body), body, 8, idle/4); status != http.StatusOK {
		t.Fatalf("slow but steady body: %d %s", status, raw)
	}
	if rev := revision(); rev != 1 {
		t.Fatalf("revision %d after the steady body", rev)
	}
}
