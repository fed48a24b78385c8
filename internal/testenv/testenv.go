// Package testenv runs a real agentbox server for tests: a fresh migrated PostgreSQL
// database (internal/testdb), the service with a fake clock, and the HTTP transport on a
// loopback listener. Helpers create boxes, hosts and agents through the admin API.
package testenv

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/agentbox/agentbox/internal/clock"
	"github.com/agentbox/agentbox/internal/faultproxy"
	"github.com/agentbox/agentbox/internal/server"
	"github.com/agentbox/agentbox/internal/service"
	"github.com/agentbox/agentbox/internal/store"
	"github.com/agentbox/agentbox/internal/testdb"
	"github.com/agentbox/agentbox/internal/upload"
)

// AdminToken is the admin token of every test server.
const AdminToken = "test-admin-token"

// Env is one running test server.
type Env struct {
	T       testing.TB
	URL     string
	DBURL   string
	Store   *store.Store
	Service *service.Service
	Clock   *clock.Fake
	Handler http.Handler
	// Uploads is the server's upload staging (Uploads.Dir() holds its temporary files).
	Uploads *upload.Stager
}

// Options tune New.
type Options struct {
	// TamperResponse is passed to the service (see service.Options).
	TamperResponse func(operationID string, body []byte) []byte
	// MCPAllowedOrigins is the Origin allow-list of /mcp (empty: any present Origin is refused).
	MCPAllowedOrigins []string
	// Log receives the server's log (nil: discarded).
	Log *slog.Logger
}

// New starts a server on its own database; everything stops when the test ends.
func New(t testing.TB, opts ...Options) *Env {
	t.Helper()
	var o Options
	if len(opts) > 0 {
		o = opts[0]
	}
	dbURL := testdb.New(t)
	ctx := context.Background()
	st, err := store.Open(ctx, dbURL)
	if err != nil {
		t.Fatalf("store: %v", err)
	}
	t.Cleanup(st.Close)
	log := o.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	clk := clock.NewFake(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	svc := service.New(service.Options{Store: st, Clock: clk, Log: log, TamperResponse: o.TamperResponse})
	up := stager(t)
	h := handler(st, svc, log, up, o)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &Env{T: t, URL: srv.URL, DBURL: dbURL, Store: st, Service: svc, Clock: clk, Handler: h, Uploads: up}
}

// Response is a decoded HTTP answer.
type Response struct {
	Status int
	Raw    []byte
	Header http.Header
}

// JSON decodes the body into a generic map.
func (r Response) JSON() map[string]any {
	var m map[string]any
	json.Unmarshal(r.Raw, &m) //nolint:errcheck
	return m
}

// Code is error.code of an error body ("" for success bodies).
func (r Response) Code() string {
	if e, ok := r.JSON()["error"].(map[string]any); ok {
		s, _ := e["code"].(string)
		return s
	}
	return ""
}

// ErrorField returns error.<name> as a string ("" when absent).
func (r Response) ErrorField(name string) string {
	if e, ok := r.JSON()["error"].(map[string]any); ok {
		s, _ := e[name].(string)
		return s
	}
	return ""
}

// MetricSample reads one sample of the server's /metrics: the value after `sample` (a metric
// name with its labels exactly as exposed), "" when absent.
func (e *Env) MetricSample(sample string) string {
	e.T.Helper()
	r := e.Do("GET", "/metrics", "", nil, nil)
	if r.Status != http.StatusOK {
		e.T.Fatalf("/metrics: %d %s", r.Status, r.Raw)
	}
	for _, line := range strings.Split(string(r.Raw), "\n") {
		if v, ok := strings.CutPrefix(line, sample+" "); ok {
			return v
		}
	}
	return ""
}

// Do sends one request with optional bearer token and headers; body may be []byte, string or any JSON value.
func (e *Env) Do(method, path, bearer string, body any, headers map[string]string) Response {
	e.T.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		rd = bytes.NewReader(b)
	case string:
		rd = bytes.NewReader([]byte(b))
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			e.T.Fatalf("marshal: %v", err)
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, e.URL+path, rd)
	if err != nil {
		e.T.Fatalf("request: %v", err)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.T.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		e.T.Fatalf("read: %v", err)
	}
	return Response{Status: resp.StatusCode, Raw: raw, Header: resp.Header}
}

// Admin calls an admin route and fails the test unless it succeeds.
func (e *Env) Admin(method, path string, body any) map[string]any {
	e.T.Helper()
	r := e.Do(method, "/admin/api/v1"+path, AdminToken, body, nil)
	if r.Status != http.StatusOK {
		e.T.Fatalf("admin %s %s: %d %s", method, path, r.Status, r.Raw)
	}
	return r.JSON()
}

// Agent is a test agent with one API key and its own session header.
type Agent struct {
	Env     *Env
	BoxKey  string
	ID      uuid.UUID
	Name    string
	Key     string
	KeyID   string
	Session string // Agentbox-Session header; "" uses the key's session lane
}

// Box creates a box with one host for 127.0.0.1 (the test client's source address).
func (e *Env) Box(key string) string {
	e.T.Helper()
	e.Admin("POST", "/boxes", map[string]any{"box_key": key})
	e.Admin("POST", "/boxes/"+key+"/hosts", map[string]any{"name": "local", "ips": []string{"127.0.0.1"}})
	return key
}

// NewAgent creates an agent on the box's "local" host; extra fields go into the create body.
func (e *Env) NewAgent(boxKey, name string, extra map[string]any) *Agent {
	e.T.Helper()
	body := map[string]any{"host_name": "local", "name": name}
	for k, v := range extra {
		body[k] = v
	}
	m := e.Admin("POST", "/boxes/"+boxKey+"/agents", body)
	agent := m["agent"].(map[string]any)
	return &Agent{Env: e, BoxKey: boxKey, ID: uuid.MustParse(agent["agent_id"].(string)), Name: name,
		Key: m["api_key"].(string), KeyID: m["key_id"].(string)}
}

// Call sends an agent request to /api/v1/boxes/{box}/<path>.
func (a *Agent) Call(method, path string, body any) Response {
	a.Env.T.Helper()
	h := map[string]string{}
	if a.Session != "" {
		h["Agentbox-Session"] = a.Session
	}
	return a.Env.Do(method, "/api/v1/boxes/"+a.BoxKey+path, a.Key, body, h)
}

// MustCall is Call that fails the test on a non-200 answer.
func (a *Agent) MustCall(method, path string, body any) map[string]any {
	a.Env.T.Helper()
	r := a.Call(method, path, body)
	if r.Status != http.StatusOK {
		a.Env.T.Fatalf("%s %s: %d %s", method, path, r.Status, r.Raw)
	}
	return r.JSON()
}

// Prime primes the agent's session and returns the result.
func (a *Agent) Prime() map[string]any {
	a.Env.T.Helper()
	return a.MustCall("POST", "/prime", map[string]any{})
}

// WithSession returns a copy of the agent that uses another session header.
func (a *Agent) WithSession(s string) *Agent {
	c := *a
	c.Session = s
	return &c
}

// On returns a copy of the agent that calls another server (on the same database).
func (a *Agent) On(e *Env) *Agent {
	c := *a
	c.Env = e
	return &c
}

// Attach starts a second, independent server (its own pool and service) on e's database,
// as another server process would be.
func Attach(t testing.TB, e *Env) *Env {
	t.Helper()
	return AttachURL(t, e, e.DBURL)
}

// AttachURL is Attach reaching e's database through dbURL (a fault proxy, a pooler).
func AttachURL(t testing.TB, e *Env, dbURL string) *Env {
	t.Helper()
	st, err := store.Open(context.Background(), dbURL)
	if err != nil {
		t.Fatalf("store: %v", err)
	}
	t.Cleanup(st.Close)
	log := slog.New(slog.DiscardHandler)
	svc := service.New(service.Options{Store: st, Clock: e.Clock, Log: log})
	up := stager(t)
	h := handler(st, svc, log, up, Options{})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &Env{T: t, URL: srv.URL, DBURL: e.DBURL, Store: st, Service: svc, Clock: e.Clock, Handler: h, Uploads: up}
}

// AttachFaulty is Attach through a fault proxy, for tests of outages: what the proxy does
// (refuse, cut, stall) happens to this server's database connections only.
func AttachFaulty(t testing.TB, e *Env) (*Env, *faultproxy.Proxy) {
	t.Helper()
	proxy, viaURL, err := faultproxy.NewFor(e.DBURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Close)
	return AttachURL(t, e, viaURL), proxy
}

// handler is the server's root handler exactly as `agentbox serve` wires it.
func handler(st *store.Store, svc *service.Service, log *slog.Logger, up *upload.Stager, o Options) http.Handler {
	return server.Handler(server.Config{Store: st, Service: svc, AdminToken: AdminToken, Log: log, MCPAllowedOrigins: o.MCPAllowedOrigins, Uploads: up})
}

// stager is a test server's upload staging, in a directory of the test's own.
func stager(t testing.TB) *upload.Stager {
	t.Helper()
	up, err := upload.NewStager(t.TempDir())
	if err != nil {
		t.Fatalf("upload staging: %v", err)
	}
	t.Cleanup(func() { up.Close() })
	return up
}

// Main is the TestMain of packages that use testenv (stops a throwaway cluster at exit).
func Main(m *testing.M) {
	testdb.MainWith(m, removeBinary)
}
