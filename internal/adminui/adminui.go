// Package adminui is the admin web UI of SPEC §13.5 at /admin: plain server-rendered HTML
// forms (no JavaScript) over the same admin operations as the admin JSON API. Every action
// calls the generated strict server interface in process, after the same closed input
// schema check the transports apply, so each rule has one implementation (internal/service).
//
// Security: an admin token signs in; the browser then holds only an opaque session ID
// (session.go). Every state-changing form carries the session's synchronizer CSRF token;
// the sign-in form carries a double-submit nonce. Every response sends a strict CSP (no
// scripts at all), nosniff, no-referrer and no-store. Secrets (new API keys) are rendered
// once on the result page and kept nowhere.
package adminui

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/agentbox/agentbox/gen/api"
	"github.com/agentbox/agentbox/gen/mcp"
	"github.com/agentbox/agentbox/internal/apierr"
	"github.com/agentbox/agentbox/internal/auth"
	"github.com/agentbox/agentbox/internal/metrics"
	"github.com/agentbox/agentbox/internal/schema"
)

// Config wires the UI.
type Config struct {
	Service api.StrictServerInterface
	Auth    *auth.Authenticator
	Log     *slog.Logger
	// Metrics records every admin operation the UI runs, with transport "admin_ui" (nil: not recorded).
	Metrics *metrics.Registry
	// Sessions keeps the UI sessions (the store: shared by every server instance).
	Sessions SessionStore
}

// CSP allows the one stylesheet and same-origin form posts; no script may run.
const CSP = "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// maxFormBytes bounds a form post (a 64 KiB profile, percent-encoded, fits).
const maxFormBytes = 1 << 20

//go:embed templates/*.html static/admin.css
var files embed.FS

// UI is the admin web UI handler.
type UI struct {
	svc      api.StrictServerInterface
	auth     *auth.Authenticator
	log      *slog.Logger
	metrics  *metrics.Registry
	sessions *sessions
	pages    map[string]*template.Template
	css      []byte
	mux      *http.ServeMux
}

// New returns the handler for "/admin" and "/admin/". Mounted beside the JSON API it
// leaves "/admin/api/…" to the API: its own method-specific routes are more specific, and
// any other path under /admin/api/ gets the API's JSON NOT_FOUND here.
func New(cfg Config) *UI {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	css, err := files.ReadFile("static/admin.css")
	if err != nil {
		panic(err)
	}
	u := &UI{svc: cfg.Service, auth: cfg.Auth, log: cfg.Log, metrics: cfg.Metrics, sessions: newSessions(cfg.Sessions, cfg.Log),
		pages: parsePages(), css: css, mux: http.NewServeMux()}
	m := u.mux
	m.HandleFunc("GET /admin/static/admin.css", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/css; charset=utf-8")
		w.Write(u.css) //nolint:errcheck
	})
	m.HandleFunc("GET /admin", toBoxes)
	m.HandleFunc("GET /admin/{$}", toBoxes)
	m.HandleFunc("GET /admin/signin", u.signinForm)
	m.HandleFunc("POST /admin/signin", u.signin)
	m.Handle("POST /admin/signout", u.authed(u.signout))
	m.Handle("GET /admin/boxes", u.authed(u.boxesPage))
	m.Handle("POST /admin/boxes", u.authed(u.boxCreate))
	m.Handle("GET /admin/boxes/{box}", u.authed(u.boxPage))
	m.Handle("POST /admin/boxes/{box}/enabled", u.authed(u.boxEnabled))
	m.Handle("POST /admin/boxes/{box}/hosts", u.authed(u.hostCreate))
	m.Handle("POST /admin/boxes/{box}/hosts/{host}", u.authed(u.hostUpdate))
	m.Handle("POST /admin/boxes/{box}/agents", u.authed(u.agentCreate))
	m.Handle("GET /admin/boxes/{box}/agents/{agent}", u.authed(u.agentPage))
	m.Handle("POST /admin/boxes/{box}/agents/{agent}/flags", u.authed(u.agentFlags))
	m.Handle("POST /admin/boxes/{box}/agents/{agent}/profile", u.authed(u.agentProfile))
	m.Handle("POST /admin/boxes/{box}/agents/{agent}/keys", u.authed(u.keyCreate))
	m.Handle("POST /admin/boxes/{box}/agents/{agent}/keys/{key}/revoke", u.authed(u.keyRevoke))
	m.Handle("GET /admin/boxes/{box}/settings", u.authed(u.settingsPage))
	m.Handle("POST /admin/boxes/{box}/settings", u.authed(u.settingsUpdate))
	m.Handle("GET /admin/boxes/{box}/rooms", u.authed(u.roomsPage))
	m.Handle("POST /admin/boxes/{box}/rooms/{room}/archive", u.authed(u.roomArchive))
	m.Handle("POST /admin/boxes/{box}/rooms/{room}/owner", u.authed(u.roomOwner))
	m.Handle("GET /admin/boxes/{box}/cleanup", u.authed(u.cleanupPage))
	m.HandleFunc("/admin/", func(w http.ResponseWriter, r *http.Request) {
		u.render(w, http.StatusNotFound, "message", page{Title: "Not found", Error: &banner{Title: "There is no such page."}})
	})
	return u
}

// ServeHTTP sets the security headers on every UI response, then routes.
func (u *UI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", CSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Frame-Options", "DENY")
	u.mux.ServeHTTP(w, r)
}

func toBoxes(w http.ResponseWriter, r *http.Request) {
	http.Redirect(w, r, "/admin/boxes", http.StatusSeeOther)
}

// call is one authenticated UI request.
type call struct {
	w    http.ResponseWriter
	r    *http.Request
	sid  string // session ID
	csrf string // the session's CSRF token, rendered into every form
}

// authed admits a request of a live session whose admin token is still valid. A POST must
// also pass checkPost (CSRF) before h runs; otherwise nothing runs and the answer is 403.
// sessionEnded answers a form whose session's token this instance no longer accepts.
const sessionEnded = "Your session has ended; sign in again. Nothing was changed."

func (u *UI) authed(h func(*call)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sid := cookieValue(r, sessionCookie)
		tokenHash, csrf, ok, err := u.sessions.lookup(r.Context(), sid)
		if err == nil && ok {
			err = u.auth.AdminHash(r.Context(), tokenHash)
			// A token this instance does not accept (revoked, or another instance's generated
			// token) signs the request out here, but the session is not deleted: this instance
			// cannot tell the two apart, and the check runs on every request anyway.
			ok = err == nil
			if !apierr.IsUnavailable(err) {
				err = nil
			}
		}
		if err != nil { // an outage is not a sign-out: the session stays, nothing was done
			u.unavailable(w)
			return
		}
		if !ok {
			if r.Method == http.MethodGet || r.Method == http.MethodHead {
				http.Redirect(w, r, "/admin/signin", http.StatusSeeOther)
				return
			}
			u.forbidden(w, sessionEnded)
			return
		}
		if !validURLText(r) {
			u.render(w, http.StatusBadRequest, "message", page{Title: "Not accepted",
				Error: &banner{Title: "The address holds text that is not valid UTF-8 or contains a NUL character. Nothing was changed."}})
			return
		}
		if r.Method == http.MethodPost {
			if !u.checkPost(w, r, csrf) {
				return
			}
			// The form may have come long after the token was checked: a token revoked
			// meanwhile changes nothing.
			if err := u.auth.AdminHash(r.Context(), tokenHash); apierr.IsUnavailable(err) {
				u.unavailable(w)
				return
			} else if err != nil {
				u.forbidden(w, sessionEnded)
				return
			}
		}
		h(&call{w: w, r: r, sid: sid, csrf: csrf})
	})
}

// checkPost reads a form post (bounded, valid UTF-8) and checks that it comes from this
// site and carries want, the expected CSRF token; it answers the request itself when not.
func (u *UI) checkPost(w http.ResponseWriter, r *http.Request, want string) bool {
	// Browsers label cross-site requests; refuse them before reading anything.
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" && site != "none" {
		u.forbidden(w, "The form was not sent from this site. Nothing was changed.")
		return false
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	if err := r.ParseForm(); err != nil {
		u.render(w, http.StatusBadRequest, "message", page{Title: "Form not accepted",
			Error: &banner{Title: "The form could not be read (too large or malformed). Nothing was changed."}})
		return false
	}
	if !sameToken(r.PostForm.Get("csrf"), want) {
		u.forbidden(w, "The form's security token is missing or wrong (an old page?). Reload the page and try again. Nothing was changed.")
		return false
	}
	for _, vs := range r.PostForm {
		for _, v := range vs {
			if schema.CheckText("", v) != nil { // never silently replaced with U+FFFD (SPEC §12, §15)
				u.render(w, http.StatusBadRequest, "message", page{Title: "Form not accepted",
					Error: &banner{Title: "The form holds text that is not valid UTF-8 or contains a NUL character. Nothing was changed."}})
				return false
			}
		}
	}
	return true
}

// validURLText applies the text rule to the decoded path (every path segment the pages
// read) and to every query key and value.
func validURLText(r *http.Request) bool {
	if schema.CheckText("", r.URL.Path) != nil {
		return false
	}
	for k, vs := range r.URL.Query() {
		if schema.CheckText("", k) != nil {
			return false
		}
		for _, v := range vs {
			if schema.CheckText("", v) != nil {
				return false
			}
		}
	}
	return true
}

// unavailable answers a request the database could not serve: nothing was done, the session
// (if any) is kept.
func (u *UI) unavailable(w http.ResponseWriter) {
	u.render(w, http.StatusServiceUnavailable, "message", page{Title: "Temporarily unavailable",
		Error: &banner{Title: "The service cannot reach its database; try again shortly. Nothing was changed."}})
}

func (u *UI) forbidden(w http.ResponseWriter, msg string) {
	u.render(w, http.StatusForbidden, "message", page{Title: "Not allowed", Error: &banner{Title: msg}})
}

// page is what every template gets.
type page struct {
	Title string
	CSRF  string // the session's CSRF token; "" when signed out (no navigation is shown)
	Box   string // the box in view, for the box navigation
	Tab   string
	Flash string
	Error *banner
	Data  any
}

// banner is a readable error. It is built from *apierr.Error, whose messages never hold the
// rejected value; the UI never puts a submitted value into a banner either.
type banner struct {
	Title   string
	Details []string
}

var codeTitles = map[apierr.Code]string{
	apierr.InvalidArgument:        "The input was rejected. Nothing was changed.",
	apierr.LimitExceeded:          "A value is over its limit. Nothing was changed.",
	apierr.NotFoundOrForbidden:    "Not found, or not allowed.",
	apierr.RevisionConflict:       "It changed since this page was loaded. Nothing was changed; review the current values and try again.",
	apierr.AuthFailed:             "Authentication failed.",
	apierr.RateLimited:            "Too many requests; try again shortly.",
	apierr.TemporarilyUnavailable: "Temporarily unavailable; try again shortly.",
	apierr.StorageFailure:         "The operation failed in storage. Nothing was written.",
}

func describe(e *apierr.Error) *banner {
	title, ok := codeTitles[e.Code]
	if !ok {
		title = "The operation was refused. Nothing was changed."
	}
	b := &banner{Title: title}
	add := func(label, v string) {
		if v != "" {
			b.Details = append(b.Details, label+v)
		}
	}
	add("", sentence(e.Message))
	add("Field: ", e.Field)
	add("Reason: ", e.Reason)
	if e.CurrentRevision != nil {
		add("Current revision: ", *e.CurrentRevision)
	}
	if e.Limit != nil {
		add("Limit: ", itoa(*e.Limit))
	}
	add("Error code: ", string(e.Code))
	return b
}

func sentence(s string) string {
	if s == "" {
		return ""
	}
	s = strings.ToUpper(s[:1]) + s[1:]
	if !strings.HasSuffix(s, ".") {
		s += "."
	}
	return s
}

// run invokes one admin operation in process exactly as the JSON API would: input (the
// operation's flattened input: path parameters and body fields) must pass the operation's
// closed input schema, then invoke calls the strict server method. It returns the success
// body T (e.g. api.AdminBoxCreate200JSONResponse) or the structured error.
func run[T any](ctx context.Context, u *UI, op string, input map[string]any, invoke func(context.Context) (any, error)) (T, *apierr.Error) {
	var zero T
	start := time.Now()
	status := http.StatusOK
	defer func() { u.metrics.Observe(op, "admin_ui", status, "", time.Since(start)) }()
	fail := func(e *apierr.Error) (T, *apierr.Error) {
		status = e.Code.HTTPStatus()
		return zero, e
	}
	raw, err := json.Marshal(input)
	if err != nil {
		u.log.ErrorContext(ctx, "admin ui input", slog.String("op", op), slog.Any("err", err))
		return fail(apierr.Storage())
	}
	if v := mcp.Operations[op].Input.ValidateJSON(raw); v != nil {
		return fail(apierr.FromViolation(v))
	}
	resp, err := invoke(ctx)
	if err != nil {
		e, ok := apierr.As(err)
		if !ok {
			u.log.ErrorContext(ctx, "admin ui operation failed", slog.String("op", op), slog.Any("err", err))
			e = apierr.Storage()
		}
		return fail(e)
	}
	out, ok := resp.(T)
	if !ok {
		u.log.ErrorContext(ctx, "admin ui: unexpected response", slog.String("op", op))
		return fail(apierr.Storage())
	}
	return out, nil
}

// input flattens path parameters and a request body into an operation's input object.
func input(params map[string]any, body any) map[string]any {
	m := map[string]any{}
	if body != nil {
		raw, err := json.Marshal(body)
		if err == nil {
			dec := json.NewDecoder(bytes.NewReader(raw))
			dec.UseNumber()
			dec.Decode(&m) //nolint:errcheck // a struct or map always marshals to an object
		}
	}
	for k, v := range params {
		m[k] = v
	}
	return m
}

func parsePages() map[string]*template.Template {
	funcs := template.FuncMap{
		"when": func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05 UTC") },
		"whenp": func(t *time.Time) string {
			if t == nil {
				return "—"
			}
			return t.UTC().Format("2006-01-02 15:04:05 UTC")
		},
		"join": strings.Join,
	}
	layout := template.Must(template.New("layout.html").Funcs(funcs).ParseFS(files, "templates/layout.html"))
	names, err := fs.Glob(files, "templates/*.html")
	if err != nil {
		panic(err)
	}
	pages := map[string]*template.Template{}
	for _, n := range names {
		name := strings.TrimSuffix(strings.TrimPrefix(n, "templates/"), ".html")
		if name == "layout" {
			continue
		}
		pages[name] = template.Must(template.Must(layout.Clone()).ParseFS(files, n))
	}
	return pages
}

// render executes a page into a buffer first, so a template failure is a clean 500.
func (u *UI) render(w http.ResponseWriter, status int, name string, p page) {
	var buf bytes.Buffer
	if err := u.pages[name].ExecuteTemplate(&buf, "layout", p); err != nil {
		u.log.Error("admin ui template", slog.String("page", name), slog.Any("err", err))
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	w.Write(buf.Bytes()) //nolint:errcheck
}

// show renders a page of a signed-in session, with its one-time notice.
func (u *UI) show(c *call, status int, name string, p page) {
	p.CSRF = c.csrf
	p.Flash = u.sessions.takeFlash(c.r.Context(), c.sid)
	u.render(c.w, status, name, p)
}

// done ends a successful form post: a notice for the next page, then Post/Redirect/Get.
func (u *UI) done(c *call, notice, to string) {
	u.sessions.setFlash(c.r.Context(), c.sid, notice)
	http.Redirect(c.w, c.r, to, http.StatusSeeOther)
}
