package adminui_test

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/agentbox/agentbox/internal/server"
	"github.com/agentbox/agentbox/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// browser is a cookie-keeping HTTP client that does not follow redirects, and checks the
// security headers on every UI response it gets.
type browser struct {
	t    *testing.T
	base string
	c    *http.Client
	csrf string // the CSRF token of the last page that had forms
}

type page struct {
	Status int
	Header http.Header
	Body   string
}

func newBrowser(t *testing.T, base string, client *http.Client) *browser {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	c := *client
	c.Jar = jar
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &browser{t: t, base: base, c: &c}
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

func (b *browser) do(req *http.Request) page {
	b.t.Helper()
	resp, err := b.c.Do(req)
	if err != nil {
		b.t.Fatalf("%s %s: %v", req.Method, req.URL.Path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		b.t.Fatal(err)
	}
	p := page{Status: resp.StatusCode, Header: resp.Header, Body: string(raw)}
	checkSecurityHeaders(b.t, req.Method+" "+req.URL.Path, p)
	if m := csrfField.FindStringSubmatch(p.Body); m != nil {
		b.csrf = m[1]
	}
	return p
}

func (b *browser) get(path string) page {
	b.t.Helper()
	req, err := http.NewRequest("GET", b.base+path, nil)
	if err != nil {
		b.t.Fatal(err)
	}
	return b.do(req)
}

// post submits a form; the CSRF token of the last page is added unless form sets "csrf".
func (b *browser) post(path string, form url.Values, headers ...string) page {
	b.t.Helper()
	if _, ok := form["csrf"]; !ok {
		form.Set("csrf", b.csrf)
	}
	req, err := http.NewRequest("POST", b.base+path, strings.NewReader(form.Encode()))
	if err != nil {
		b.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	return b.do(req)
}

// signIn signs in through the form and returns the sign-in response.
func (b *browser) signIn(token string) page {
	b.t.Helper()
	if p := b.get("/admin/signin"); p.Status != http.StatusOK {
		b.t.Fatalf("sign-in form: %d", p.Status)
	}
	return b.post("/admin/signin", url.Values{"token": {token}})
}

func (b *browser) mustSignIn() {
	b.t.Helper()
	if p := b.signIn(testenv.AdminToken); p.Status != http.StatusSeeOther || p.Header.Get("Location") != "/admin/boxes" {
		b.t.Fatalf("sign-in: %d %s", p.Status, p.Body)
	}
	if p := b.get("/admin/boxes"); p.Status != http.StatusOK {
		b.t.Fatalf("boxes after sign-in: %d", p.Status)
	}
}

// expect fails unless p has the status and every wanted substring.
func expect(t *testing.T, what string, p page, status int, want ...string) {
	t.Helper()
	if p.Status != status {
		t.Fatalf("%s: status %d, want %d\n%s", what, p.Status, status, p.Body)
	}
	for _, w := range want {
		if !strings.Contains(p.Body, w) {
			t.Fatalf("%s: page lacks %q\n%s", what, w, p.Body)
		}
	}
}

func checkSecurityHeaders(t *testing.T, what string, p page) {
	t.Helper()
	want := map[string]string{
		"Content-Security-Policy": "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
		"X-Content-Type-Options":  "nosniff",
		"Referrer-Policy":         "no-referrer",
		"Cache-Control":           "no-store",
	}
	for k, v := range want {
		if got := p.Header.Get(k); got != v {
			t.Errorf("%s: %s = %q, want %q", what, k, got, v)
		}
	}
	if strings.Contains(strings.ToLower(p.Body), "<script") || strings.Contains(p.Body, " style=") {
		t.Errorf("%s: page has a script or inline style", what)
	}
}

func sessionCookie(t *testing.T, p page) *http.Cookie {
	t.Helper()
	for _, c := range (&http.Response{Header: p.Header}).Cookies() {
		if c.Name == "agentbox_admin" {
			return c
		}
	}
	return nil
}

// boxKeys lists the box keys through the admin JSON API.
func boxKeys(e *testenv.Env) []string {
	var keys []string
	for _, b := range e.Admin("GET", "/boxes", nil)["items"].([]any) {
		keys = append(keys, b.(map[string]any)["box_key"].(string))
	}
	return keys
}

func TestSignInFailureSetsNoCookie(t *testing.T) {
	t.Parallel()
	e := testenv.New(t)
	b := newBrowser(t, e.URL, http.DefaultClient)

	p := b.signIn("wrong-token-zzq")
	expect(t, "wrong token", p, http.StatusUnauthorized, "Sign-in failed")
	if len(p.Header.Values("Set-Cookie")) != 0 {
		t.Fatalf("a failed sign-in set cookies: %v", p.Header.Values("Set-Cookie"))
	}
	if strings.Contains(p.Body, "wrong-token-zzq") {
		t.Fatal("the rejected token is echoed")
	}
	if p := b.get("/admin/boxes"); p.Status != http.StatusSeeOther || p.Header.Get("Location") != "/admin/signin" {
		t.Fatalf("signed-out boxes page: %d %s", p.Status, p.Header.Get("Location"))
	}

	// The right token without the sign-in form's nonce (login CSRF) is refused too.
	fresh := newBrowser(t, e.URL, http.DefaultClient)
	p = fresh.post("/admin/signin", url.Values{"token": {testenv.AdminToken}, "csrf": {"forged"}})
	expect(t, "sign-in without the form nonce", p, http.StatusForbidden)
	if sessionCookie(t, p) != nil {
		t.Fatal("a sign-in without the nonce set a session cookie")
	}
}

func TestSessionCookieAttributes(t *testing.T) {
	t.Parallel()
	e := testenv.New(t)
	b := newBrowser(t, e.URL, http.DefaultClient)
	p := b.signIn(testenv.AdminToken)
	c := sessionCookie(t, p)
	if c == nil {
		t.Fatalf("no session cookie: %v", p.Header.Values("Set-Cookie"))
	}
	if !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/admin" || c.Secure {
		t.Fatalf("cookie attributes: %+v", c)
	}
	if strings.Contains(c.Value, testenv.AdminToken) || len(c.Value) < 40 {
		t.Fatalf("the cookie is not an opaque random ID: %q", c.Value)
	}
	// A second sign-in gets a different session ID.
	if c2 := sessionCookie(t, b.signIn(testenv.AdminToken)); c2 == nil || c2.Value == c.Value {
		t.Fatal("the session ID was not renewed on sign-in")
	}

	// Over TLS the cookie is Secure.
	tlsSrv := httptest.NewTLSServer(e.Handler)
	t.Cleanup(tlsSrv.Close)
	client := tlsSrv.Client()
	client.Transport.(*http.Transport).TLSClientConfig = &tls.Config{InsecureSkipVerify: true} //nolint:gosec // test server
	tb := newBrowser(t, tlsSrv.URL, client)
	if c := sessionCookie(t, tb.signIn(testenv.AdminToken)); c == nil || !c.Secure || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode {
		t.Fatalf("TLS cookie: %+v", c)
	}
}

func TestSecurityHeadersOnEveryPage(t *testing.T) {
	t.Parallel()
	e := testenv.New(t)
	e.Box("alpha")
	a := e.NewAgent("alpha", "planner", nil)
	b := newBrowser(t, e.URL, http.DefaultClient)
	// Signed out: every answer carries the headers (checked by b.do).
	b.get("/admin")
	b.get("/admin/")
	b.get("/admin/boxes")
	b.get("/admin/signin")
	b.get("/admin/static/admin.css")
	b.post("/admin/boxes", url.Values{"box_key": {"x1"}})
	b.mustSignIn()
	for _, path := range []string{
		"/admin", "/admin/boxes", "/admin/boxes/alpha", "/admin/boxes/alpha/agents/" + a.ID.String(),
		"/admin/boxes/alpha/settings", "/admin/boxes/alpha/rooms", "/admin/boxes/alpha/cleanup",
		"/admin/boxes/nope", "/admin/no-such-page",
	} {
		b.get(path)
	}
	css := b.get("/admin/static/admin.css")
	if css.Status != http.StatusOK || !strings.HasPrefix(css.Header.Get("Content-Type"), "text/css") {
		t.Fatalf("css: %d %s", css.Status, css.Header.Get("Content-Type"))
	}
}

func TestAdminAPIStillServedUnderTheUI(t *testing.T) {
	t.Parallel()
	e := testenv.New(t)
	e.Box("alpha")
	if got := boxKeys(e); len(got) != 1 || got[0] != "alpha" {
		t.Fatalf("admin API boxes: %v", got)
	}
	for _, m := range []string{"GET", "POST", "DELETE"} {
		r := e.Do(m, "/admin/api/v1/no-such-route", testenv.AdminToken, nil, nil)
		if r.Status != http.StatusNotFound || r.Code() != "NOT_FOUND_OR_FORBIDDEN" {
			t.Fatalf("%s unknown admin API route: %d %s", m, r.Status, r.Raw)
		}
	}
	if r := e.Do("GET", "/admin/api/v1/boxes", "", nil, nil); r.Status != http.StatusUnauthorized || r.Code() != "AUTH_FAILED" {
		t.Fatalf("admin API without token: %d %s", r.Status, r.Raw)
	}
}

func TestCSRFRejectedAndNothingWritten(t *testing.T) {
	t.Parallel()
	e := testenv.New(t)
	b := newBrowser(t, e.URL, http.DefaultClient)
	b.mustSignIn()
	other := newBrowser(t, e.URL, http.DefaultClient)
	other.mustSignIn()

	for name, form := range map[string]url.Values{
		"missing":       {"box_key": {"evil-missing"}, "csrf": {""}},
		"wrong":         {"box_key": {"evil-wrong"}, "csrf": {"not-the-token"}},
		"other session": {"box_key": {"evil-other"}, "csrf": {other.csrf}},
	} {
		p := b.post("/admin/boxes", form)
		expect(t, "CSRF "+name, p, http.StatusForbidden, "security token")
	}
	// The right token from a cross-site page (the browser says so) is refused as well.
	p := b.post("/admin/boxes", url.Values{"box_key": {"evil-cross"}}, "Sec-Fetch-Site", "cross-site")
	expect(t, "cross-site post", p, http.StatusForbidden)
	// No session at all.
	anon := newBrowser(t, e.URL, http.DefaultClient)
	expect(t, "no session", anon.post("/admin/boxes", url.Values{"box_key": {"evil-anon"}, "csrf": {b.csrf}}), http.StatusForbidden)

	if got := boxKeys(e); len(got) != 0 {
		t.Fatalf("a refused post wrote boxes: %v", got)
	}
	// The same form with the token works.
	expect(t, "with token", b.post("/admin/boxes", url.Values{"box_key": {"good"}}), http.StatusSeeOther)
	if got := boxKeys(e); len(got) != 1 || got[0] != "good" {
		t.Fatalf("boxes: %v", got)
	}
}

func TestFullFlow(t *testing.T) {
	t.Parallel()
	e := testenv.New(t)
	b := newBrowser(t, e.URL, http.DefaultClient)
	b.mustSignIn()

	// Box.
	p := b.post("/admin/boxes", url.Values{"box_key": {"demo"}, "name": {"Demo box"}})
	expect(t, "create box", p, http.StatusSeeOther)
	expect(t, "boxes", b.get(p.Header.Get("Location")), http.StatusOK, "Box demo created.", `href="/admin/boxes/demo"`, "Demo box")
	// A rejected value is not echoed back.
	p = b.post("/admin/boxes", url.Values{"box_key": {"Bad_Key_zzq"}})
	expect(t, "bad box key", p, http.StatusBadRequest, "The input was rejected", "box_key", "INVALID_ARGUMENT")
	if strings.Contains(p.Body, "zzq") {
		t.Fatal("the rejected box key is echoed")
	}
	expect(t, "duplicate box", b.post("/admin/boxes", url.Values{"box_key": {"demo"}}), http.StatusBadRequest, "already_exists")

	// Host with IPs, then new IPs.
	expect(t, "create host", b.post("/admin/boxes/demo/hosts", url.Values{"name": {"laptop"}, "ips": {"10.1.2.3, ::ffff:127.0.0.1"}}), http.StatusSeeOther)
	expect(t, "box page", b.get("/admin/boxes/demo"), http.StatusOK, "Host laptop registered.", `value="10.1.2.3 127.0.0.1"`)
	p = b.post("/admin/boxes/demo/hosts/laptop", url.Values{"ips": {"10.9.9.9/24"}})
	expect(t, "CIDR refused", p, http.StatusBadRequest, "ips[0]", "exact IPv4 or IPv6")
	if strings.Contains(p.Body, "10.9.9.9") {
		t.Fatal("the rejected IP is echoed")
	}
	expect(t, "edit IPs", b.post("/admin/boxes/demo/hosts/laptop", url.Values{"ips": {"127.0.0.1\n::1"}}), http.StatusSeeOther)
	hosts := e.Admin("GET", "/boxes/demo/hosts", nil)["items"].([]any)
	if ips := hosts[0].(map[string]any)["ips"].([]any); len(ips) != 2 || ips[0] != "127.0.0.1" || ips[1] != "::1" {
		t.Fatalf("host IPs: %v", ips)
	}

	// Agent: the API key is shown once.
	b.get("/admin/boxes/demo")
	p = b.post("/admin/boxes/demo/agents", url.Values{"host_name": {"laptop"}, "name": {"planner"}, "listed": {"on"},
		"role": {"plans"}, "profile_text": {"You plan.\r\nCarefully."}})
	expect(t, "create agent", p, http.StatusOK, "shown only this once")
	key := regexp.MustCompile(`abk_[A-Za-z0-9_-]+`).FindString(p.Body)
	if key == "" {
		t.Fatalf("no API key on the result page:\n%s", p.Body)
	}
	if r := e.Do("GET", "/api/v1/boxes/demo/me", key, nil, nil); r.Status != http.StatusOK {
		t.Fatalf("the new key does not work: %d %s", r.Status, r.Raw)
	}
	agents := e.Admin("GET", "/boxes/demo/agents", nil)["items"].([]any)
	agent := agents[0].(map[string]any)
	agentID := agent["agent_id"].(string)
	if agent["listed"] != true || agent["role"] != "plans" {
		t.Fatalf("agent: %v", agent)
	}
	agentPage := "/admin/boxes/demo/agents/" + agentID
	for _, path := range []string{"/admin/boxes/demo", agentPage, "/admin/boxes"} {
		if p := b.get(path); p.Status != http.StatusOK || strings.Contains(p.Body, key) || strings.Contains(p.Body, "abk_") {
			t.Fatalf("%s: %d; the key must not be retrievable after its result page", path, p.Status)
		}
	}
	if r := e.Do("GET", "/admin/api/v1/boxes/demo/agents/"+agentID+"/keys", testenv.AdminToken, nil, nil); strings.Contains(string(r.Raw), "abk_") {
		t.Fatal("the admin API returns a key secret")
	}

	// Flags and profile.
	b.get(agentPage)
	expect(t, "unlist", b.post(agentPage+"/flags", url.Values{"listed": {"false"}}), http.StatusSeeOther)
	expect(t, "disable", b.post(agentPage+"/flags", url.Values{"enabled": {"false"}}), http.StatusSeeOther)
	expect(t, "agent page", b.get(agentPage), http.StatusOK, "is now disabled, not listed", "Enable agent", "List in the directory")
	expect(t, "enable", b.post(agentPage+"/flags", url.Values{"enabled": {"true"}}), http.StatusSeeOther)
	expect(t, "bad flag", b.post(agentPage+"/flags", url.Values{"enabled": {"maybe"}}), http.StatusBadRequest, "Must be true or false.", "Field: enabled")
	// The profile form shows the current text (escaped) to edit; saving it unchanged keeps
	// the version.
	expect(t, "agent page with its profile", b.get(agentPage), http.StatusOK, "You plan.\nCarefully.</textarea>", "Current version 1")
	expect(t, "profile", b.post(agentPage+"/profile", url.Values{"text": {"You review <b>carefully</b>."}}), http.StatusSeeOther)
	expect(t, "agent page with the new profile", b.get(agentPage), http.StatusOK, "You review &lt;b&gt;carefully&lt;/b&gt;.</textarea>")
	expect(t, "profile saved unchanged", b.post(agentPage+"/profile", url.Values{"text": {"You review <b>carefully</b>."}}), http.StatusSeeOther)
	agent = e.Admin("GET", "/boxes/demo/agents", nil)["items"].([]any)[0].(map[string]any)
	if agent["enabled"] != true || agent["listed"] != false || agent["profile_version"] != "2" {
		t.Fatalf("agent after edits: %v", agent)
	}

	// Keys: a router key (shown once), then revoke the first key.
	b.get(agentPage)
	p = b.post(agentPage+"/keys", url.Values{"router": {"on"}})
	expect(t, "create key", p, http.StatusOK, "shown only this once", "router")
	routerKey := regexp.MustCompile(`abk_[A-Za-z0-9_-]+`).FindString(p.Body)
	if routerKey == "" || routerKey == key {
		t.Fatal("no new key on the result page")
	}
	firstKeyID := e.Admin("GET", "/boxes/demo/agents/planner/keys", nil)["items"].([]any)
	var revokeID string
	for _, k := range firstKeyID {
		if k.(map[string]any)["router"] == false {
			revokeID = k.(map[string]any)["key_id"].(string)
		}
	}
	b.get(agentPage)
	expect(t, "revoke", b.post(agentPage+"/keys/"+revokeID+"/revoke", url.Values{}), http.StatusSeeOther)
	expect(t, "agent page after revoke", b.get(agentPage), http.StatusOK, "Key "+revokeID+" revoked.")
	if r := e.Do("GET", "/api/v1/boxes/demo/me", key, nil, nil); r.Status != http.StatusUnauthorized {
		t.Fatalf("a revoked key still works: %d", r.Status)
	}
	if r := e.Do("GET", "/api/v1/boxes/demo/me", routerKey, nil, nil); r.Status != http.StatusOK {
		t.Fatalf("the router key does not work: %d %s", r.Status, r.Raw)
	}
	expect(t, "revoke unknown", b.post(agentPage+"/keys/"+uuid.NewString()+"/revoke", url.Values{}), http.StatusNotFound, "Not found")
	// A key is revoked only through the page of the agent it belongs to: another agent's key
	// in this URL, or an agent the box does not have, is not found and stays valid.
	other := e.NewAgent("demo", "other", map[string]any{"host_name": "laptop"})
	b.get(agentPage)
	expect(t, "revoke another agent's key", b.post(agentPage+"/keys/"+other.KeyID+"/revoke", url.Values{}), http.StatusNotFound, "Not found")
	b.get(agentPage)
	p = b.post("/admin/boxes/demo/agents/"+uuid.NewString()+"/keys/"+other.KeyID+"/revoke", url.Values{})
	expect(t, "revoke through an unknown agent", p, http.StatusNotFound)
	if p.Header.Get("Location") != "" {
		t.Fatalf("an unknown agent's URL is sent back: %q", p.Header.Get("Location"))
	}
	if r := e.Do("GET", "/api/v1/boxes/demo/me", other.Key, nil, nil); r.Status == http.StatusUnauthorized {
		t.Fatal("a key revoked through another agent's page")
	}

	// Rooms: archive one, reassign the owner of another to an active member.
	owner := &testenv.Agent{Env: e, BoxKey: "demo", Name: "planner", Key: routerKey}
	owner.Prime()
	helper := e.NewAgent("demo", "helper", map[string]any{"host_name": "laptop"})
	helper.Prime()
	roomA := owner.MustCall("POST", "/rooms", map[string]any{"name": "archive-me", "idempotency_key": "r1"})["room_id"].(string)
	roomB := owner.MustCall("POST", "/rooms", map[string]any{"name": "hand-over", "invitee_agent_ids": []string{helper.ID.String()}, "idempotency_key": "r2"})["room_id"].(string)
	expect(t, "rooms", b.get("/admin/boxes/demo/rooms"), http.StatusOK, "archive-me", "hand-over")
	expect(t, "not a member yet", b.post("/admin/boxes/demo/rooms/"+roomB+"/owner", url.Values{"agent_ref": {helper.ID.String()}}), http.StatusBadRequest, "not_a_member")
	helper.MustCall("POST", "/rooms/"+roomB+"/join", map[string]any{"idempotency_key": "j1"})
	b.get("/admin/boxes/demo/rooms")
	expect(t, "set owner", b.post("/admin/boxes/demo/rooms/"+roomB+"/owner", url.Values{"agent_ref": {helper.ID.String()}}), http.StatusSeeOther)
	expect(t, "archive", b.post("/admin/boxes/demo/rooms/"+roomA+"/archive", url.Values{}), http.StatusSeeOther)
	rooms := map[string]map[string]any{}
	for _, r := range e.Admin("GET", "/boxes/demo/rooms", nil)["items"].([]any) {
		rooms[r.(map[string]any)["room_id"].(string)] = r.(map[string]any)
	}
	if rooms[roomA]["status"] != "archived" || rooms[roomB]["owner_agent_id"] != helper.ID.String() {
		t.Fatalf("rooms after edits: %v", rooms)
	}

	// Cleanup health and box disable.
	expect(t, "cleanup", b.get("/admin/boxes/demo/cleanup"), http.StatusOK, "State", "idle", "Deleted messages")
	b.get("/admin/boxes")
	expect(t, "disable box", b.post("/admin/boxes/demo/enabled", url.Values{"enabled": {"false"}}), http.StatusSeeOther)
	expect(t, "boxes", b.get("/admin/boxes"), http.StatusOK, "Box demo disabled.", "Enable")
	if r := e.Do("GET", "/api/v1/boxes/demo/me", routerKey, nil, nil); r.Status != http.StatusUnauthorized {
		t.Fatalf("a disabled box still admits keys: %d", r.Status)
	}

	// Sign out ends the session server-side: the old cookie no longer works.
	old := b.c.Jar.Cookies(mustURL(t, e.URL+"/admin"))
	expect(t, "sign out", b.post("/admin/signout", url.Values{}), http.StatusSeeOther)
	replay := newBrowser(t, e.URL, http.DefaultClient)
	replay.c.Jar.SetCookies(mustURL(t, e.URL+"/admin"), old)
	if p := replay.get("/admin/boxes"); p.Status != http.StatusSeeOther {
		t.Fatalf("a signed-out session still works: %d", p.Status)
	}
}

func TestSettingsStaleRevision(t *testing.T) {
	t.Parallel()
	e := testenv.New(t)
	e.Box("alpha")
	b := newBrowser(t, e.URL, http.DefaultClient)
	b.mustSignIn()

	p := b.get("/admin/boxes/alpha/settings")
	rev := regexp.MustCompile(`name="expected_revision" value="(\d+)"`).FindStringSubmatch(p.Body)
	if rev == nil {
		t.Fatalf("no expected_revision on the settings page:\n%s", p.Body)
	}
	// Someone else changes the settings meanwhile.
	changed := e.Admin("PATCH", "/boxes/alpha/settings", map[string]any{"expected_revision": rev[1], "settings": map[string]any{"page_limit_default": 30}})
	p = b.post("/admin/boxes/alpha/settings", url.Values{"expected_revision": {rev[1]}, "settings": {"lease_default_seconds=42423\nlease_max_seconds=42424"}})
	expect(t, "stale revision", p, http.StatusConflict, "REVISION_CONFLICT", "Nothing was changed", "Current revision: "+changed["settings_revision"].(string))
	if strings.Contains(p.Body, "42423") || strings.Contains(p.Body, "42424") {
		t.Fatal("the rejected values are echoed")
	}
	after := e.Admin("GET", "/boxes/alpha/settings", nil)
	s := after["settings"].(map[string]any)
	if after["settings_revision"] != changed["settings_revision"] || s["page_limit_default"] != float64(30) || s["lease_max_seconds"] == float64(4243) {
		t.Fatalf("a stale settings form changed something: %v", after)
	}

	// Unknown keys and bad lines are refused without a write.
	for _, text := range []string{"no_such_setting=1", "page_limit_default", "page_limit_default=abc", "page_limit_default=0"} {
		b.get("/admin/boxes/alpha/settings")
		p = b.post("/admin/boxes/alpha/settings", url.Values{"expected_revision": {changed["settings_revision"].(string)}, "settings": {text}})
		expect(t, text, p, http.StatusBadRequest, "INVALID_ARGUMENT")
	}
	// A key that is no setting name is called that, not a malformed line, and never shown.
	b.get("/admin/boxes/alpha/settings")
	p = b.post("/admin/boxes/alpha/settings", url.Values{"expected_revision": {changed["settings_revision"].(string)}, "settings": {"SECRETKEY=5"}})
	expect(t, "an upper-case key", p, http.StatusBadRequest, "does not start with a setting name")
	if strings.Contains(p.Body, "SECRETKEY") {
		t.Fatal("the refused key was echoed")
	}
	if got := e.Admin("GET", "/boxes/alpha/settings", nil); got["settings_revision"] != changed["settings_revision"] {
		t.Fatalf("a refused settings form wrote: %v", got)
	}

	// With the current revision the merge is saved.
	p = b.get("/admin/boxes/alpha/settings")
	expect(t, "settings page", p, http.StatusOK, `value="`+changed["settings_revision"].(string)+`"`)
	p = b.post("/admin/boxes/alpha/settings", url.Values{"expected_revision": {changed["settings_revision"].(string)}, "settings": {"# tighter pages\r\npage_limit_default = 20\r\n"}})
	expect(t, "save settings", p, http.StatusSeeOther)
	after = e.Admin("GET", "/boxes/alpha/settings", nil)
	if after["settings"].(map[string]any)["page_limit_default"] != float64(20) || after["settings_revision"] == changed["settings_revision"] {
		t.Fatalf("settings after save: %v", after)
	}
	expect(t, "settings page", b.get("/admin/boxes/alpha/settings"), http.StatusOK, "Settings saved; the settings revision is now "+after["settings_revision"].(string))
}

func TestIssuedTokenSessionEndsWhenRevoked(t *testing.T) {
	t.Parallel()
	e := testenv.New(t)
	issued := e.Admin("POST", "/tokens", map[string]any{"label": "ui"})
	b := newBrowser(t, e.URL, http.DefaultClient)
	if p := b.signIn(issued["token"].(string)); p.Status != http.StatusSeeOther {
		t.Fatalf("sign-in with an issued token: %d", p.Status)
	}
	expect(t, "boxes", b.get("/admin/boxes"), http.StatusOK, "Boxes")
	e.Admin("POST", "/tokens/"+issued["token_id"].(string)+"/revoke", nil)
	if p := b.get("/admin/boxes"); p.Status != http.StatusSeeOther || p.Header.Get("Location") != "/admin/signin" {
		t.Fatalf("a session of a revoked token still works: %d", p.Status)
	}
	expect(t, "post after revoke", b.post("/admin/boxes", url.Values{"box_key": {"late"}}), http.StatusForbidden)
	if got := boxKeys(e); len(got) != 0 {
		t.Fatalf("boxes: %v", got)
	}
}

// An instance started with another admin token (each instance generated its own, say) does
// not accept a session signed in with the first one's token: it sends the browser to sign in,
// but does not delete the session, which the first instance goes on serving.
func TestAnotherInstancesTokenKeepsTheSession(t *testing.T) {
	t.Parallel()
	e := testenv.New(t)
	other := httptest.NewServer(server.Handler(server.Config{Store: e.Store, Service: e.Service,
		AdminToken: "another-instances-token", Log: slog.New(slog.DiscardHandler), Uploads: e.Uploads}))
	t.Cleanup(other.Close)
	b := newBrowser(t, e.URL, http.DefaultClient)
	b.mustSignIn()
	b.base = other.URL
	if p := b.get("/admin/boxes"); p.Status != http.StatusSeeOther || p.Header.Get("Location") != "/admin/signin" {
		t.Fatalf("an instance that does not accept the token: %d", p.Status)
	}
	b.base = e.URL
	expect(t, "boxes back on the first instance", b.get("/admin/boxes"), http.StatusOK, "Boxes")
}

// An outage is not a sign-out (and not a wrong token): while the database cannot be reached
// a page answers 503 and says to try again, sign-in says it is unavailable rather than that
// the token is invalid, and the session works again once the database is back.
func TestOutageKeepsTheSession(t *testing.T) {
	t.Parallel()
	e := testenv.New(t)
	via, proxy := testenv.AttachFaulty(t, e)
	issued := e.Admin("POST", "/tokens", map[string]any{"label": "ui"})
	b := newBrowser(t, via.URL, http.DefaultClient)
	if p := b.signIn(issued["token"].(string)); p.Status != http.StatusSeeOther {
		t.Fatalf("sign-in: %d %s", p.Status, p.Body)
	}
	expect(t, "boxes before the outage", b.get("/admin/boxes"), http.StatusOK, "Boxes")
	proxy.Refuse(true)
	proxy.Cut()
	expect(t, "a page during the outage", b.get("/admin/boxes"), http.StatusServiceUnavailable, "try again")
	expect(t, "a form during the outage", b.post("/admin/boxes", url.Values{"box_key": {"lost"}}), http.StatusServiceUnavailable, "Nothing was changed")
	fresh := newBrowser(t, via.URL, http.DefaultClient)
	expect(t, "sign-in during the outage", fresh.signIn(issued["token"].(string)), http.StatusServiceUnavailable, "temporarily unavailable")
	proxy.Refuse(false)
	expect(t, "boxes after the outage", b.get("/admin/boxes"), http.StatusOK, "Boxes")
	if got := boxKeys(e); len(got) != 0 {
		t.Fatalf("boxes: %v", got)
	}
}

// A form posted with an issued token that is revoked while the form arrives changes nothing
// (Expect: 100-continue makes the server say when it starts reading the form, after it has
// checked the session's token).
func TestTokenRevokedWhileTheFormArrivesChangesNothing(t *testing.T) {
	t.Parallel()
	e := testenv.New(t)
	issued := e.Admin("POST", "/tokens", map[string]any{"label": "ui"})
	b := newBrowser(t, e.URL, http.DefaultClient)
	p := b.signIn(issued["token"].(string))
	cookie := sessionCookie(t, p)
	if p.Status != http.StatusSeeOther || cookie == nil {
		t.Fatalf("sign-in: %d", p.Status)
	}
	expect(t, "boxes", b.get("/admin/boxes"), http.StatusOK, "Boxes") // the page's CSRF token
	form := url.Values{"box_key": {"late"}, "csrf": {b.csrf}}.Encode()
	conn, err := net.Dial("tcp", strings.TrimPrefix(e.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(30 * time.Second)) //nolint:errcheck
	fmt.Fprintf(conn, "POST /admin/boxes HTTP/1.1\r\nHost: x\r\nCookie: %s=%s\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: %d\r\nExpect: 100-continue\r\n\r\n",
		cookie.Name, cookie.Value, len(form))
	rd := bufio.NewReader(conn)
	if line, err := rd.ReadString('\n'); err != nil || !strings.Contains(line, " 100 ") {
		t.Fatalf("no 100 Continue: %q %v", line, err)
	}
	rd.ReadString('\n') //nolint:errcheck // the blank line after the interim response
	e.Admin("POST", "/tokens/"+issued["token_id"].(string)+"/revoke", nil)
	io.WriteString(conn, form) //nolint:errcheck
	resp, err := http.ReadResponse(rd, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("a form whose token was revoked while it arrived: %d", resp.StatusCode)
	}
	if got := boxKeys(e); len(got) != 0 {
		t.Fatalf("boxes: %v", got)
	}
}

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// Several instances as one (issue 11, finding 9): a browser signed in on one instance stays
// signed in when the load balancer sends it to another, forms posted there pass CSRF, and
// signing out on a third ends the session on all of them.
func TestSessionSurvivesAChangeOfInstance(t *testing.T) {
	t.Parallel()
	e := testenv.New(t)
	e2, e3 := testenv.Attach(t, e), testenv.Attach(t, e)
	b := newBrowser(t, e.URL, http.DefaultClient) // cookies are per host, not per port
	b.mustSignIn()
	b.base = e2.URL
	expect(t, "boxes on a second instance", b.get("/admin/boxes"), http.StatusOK, "Boxes")
	b.base = e3.URL
	if p := b.post("/admin/boxes", url.Values{"box_key": {"moved"}}); p.Status != http.StatusSeeOther {
		t.Fatalf("a form on a third instance: %d %s", p.Status, p.Body)
	}
	if got := boxKeys(e); len(got) != 1 || got[0] != "moved" {
		t.Fatalf("boxes: %v", got)
	}
	b.get("/admin/boxes")
	b.post("/admin/signout", url.Values{})
	b.base = e.URL
	if p := b.get("/admin/boxes"); p.Status != http.StatusSeeOther || p.Header.Get("Location") != "/admin/signin" {
		t.Fatalf("signed out on one instance, still signed in on another: %d", p.Status)
	}
}

// Text PostgreSQL cannot hold is refused by the UI before any admin operation runs: a NUL
// or invalid UTF-8 in a form field or in a path segment (issue 11, finding 3).
func TestUnstorableTextRefused(t *testing.T) {
	t.Parallel()
	e := testenv.New(t)
	e.Box("alpha")
	b := newBrowser(t, e.URL, http.DefaultClient)
	b.mustSignIn()
	for _, bad := range []string{"x\x00y", "x\xffy"} {
		expect(t, "form field", b.post("/admin/boxes", url.Values{"box_key": {"new-box"}, "name": {bad}}), http.StatusBadRequest)
	}
	for _, path := range []string{"/admin/boxes/al%00pha", "/admin/boxes/al%FFpha"} {
		expect(t, "path "+path, b.get(path), http.StatusBadRequest)
	}
	if got := boxKeys(e); len(got) != 1 {
		t.Fatalf("boxes: %v", got)
	}
}
