// Package httpserver is the HTTP transport: routing, authentication, strict input decoding
// and the error envelope. It holds no product rule; every operation is a service method.
package httpserver

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/agentbox/agentbox/gen/api"
	"github.com/agentbox/agentbox/gen/mcp"
	"github.com/agentbox/agentbox/internal/apierr"
	"github.com/agentbox/agentbox/internal/auth"
	"github.com/agentbox/agentbox/internal/metrics"
	"github.com/agentbox/agentbox/internal/schema"
	"github.com/agentbox/agentbox/internal/store"
	"github.com/agentbox/agentbox/spec"
)

// Config wires the server.
type Config struct {
	Service api.StrictServerInterface
	Auth    *auth.Authenticator
	Ready   func(context.Context) error // nil: always ready
	Log     *slog.Logger
	// Extra routes mounted beside the API (e.g. "/mcp").
	Extra map[string]http.Handler
	// Metrics records every API request (nil: not recorded, /metrics absent).
	Metrics *metrics.Registry
	// MetricsToken, when set, is the bearer token /metrics requires.
	MetricsToken string
	// Uploads enables multipart uploads on the operations that declare them (upload.go).
	Uploads *UploadConfig
	// BodyIdleTimeout bounds how long a request body may send nothing (0: DefaultBodyIdleTimeout).
	BodyIdleTimeout time.Duration
}

// DefaultBodyIdleTimeout is how long a request body may pause before the server stops waiting
// for it. It bounds a stalled or trickling body (which would otherwise hold its connection and
// handler for ever) without bounding an upload that keeps arriving, however slowly.
const DefaultBodyIdleTimeout = 30 * time.Second

// New returns the root handler.
func New(cfg Config) http.Handler {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.BodyIdleTimeout <= 0 {
		cfg.BodyIdleTimeout = DefaultBodyIdleTimeout
	}
	strict := api.NewStrictHandlerWithOptions(cfg.Service, nil, api.StrictHTTPServerOptions{
		RequestErrorHandlerFunc: func(w http.ResponseWriter, r *http.Request, err error) {
			WriteError(w, decodeError(err))
		},
		ResponseErrorHandlerFunc: func(w http.ResponseWriter, r *http.Request, err error) {
			if sw, ok := w.(*statusWriter); ok && sw.wrote {
				// A streamed body (a download) failed after its headers went out: cut the
				// connection so the client sees an incomplete response, never an error
				// body spliced into the bytes.
				cfg.Log.WarnContext(r.Context(), "response stream failed", slog.Any("err", err))
				panic(http.ErrAbortHandler)
			}
			if e, ok := apierr.As(err); ok {
				WriteError(w, e)
				return
			}
			cfg.Log.ErrorContext(r.Context(), "response error", slog.Any("err", err))
			WriteError(w, apierr.Storage())
		},
	})
	routes := http.NewServeMux()
	generated := api.HandlerWithOptions(strict, api.StdHTTPServerOptions{
		BaseRouter: http.NewServeMux(),
		ErrorHandlerFunc: func(w http.ResponseWriter, r *http.Request, err error) {
			// Every binding error names its parameter (SPEC §12: field), never its value.
			var (
				format   *api.InvalidParamFormatError
				missing  *api.RequiredParamError
				header   *api.RequiredHeaderError
				unparsed *api.UnmarshalingParamError
				repeated *api.TooManyValuesForParamError
			)
			switch {
			case errors.As(err, &format):
				WriteError(w, apierr.Invalid(format.ParamName, "the parameter has the wrong format"))
			case errors.As(err, &missing):
				WriteError(w, apierr.Invalid(missing.ParamName, "required field missing"))
			case errors.As(err, &header):
				WriteError(w, apierr.Invalid(header.ParamName, "required field missing"))
			case errors.As(err, &unparsed):
				WriteError(w, apierr.Invalid(unparsed.ParamName, "the parameter has the wrong format"))
			case errors.As(err, &repeated):
				WriteError(w, apierr.Invalid(repeated.ParamName, "the parameter is given more than once; send it once"))
			default:
				WriteError(w, apierr.Invalid("", "a request parameter is missing or malformed"))
			}
		},
	})
	for _, op := range mcp.Operations {
		routes.Handle(op.Pattern, gate(cfg, op, generated))
	}
	routes.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	routes.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		if cfg.Ready != nil {
			if err := cfg.Ready(r.Context()); err != nil {
				cfg.Log.WarnContext(r.Context(), "not ready", slog.Any("err", err))
				writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "unavailable"})
				return
			}
		}
		writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
	})
	if cfg.Metrics != nil {
		routes.HandleFunc("GET /metrics", func(w http.ResponseWriter, r *http.Request) {
			if cfg.MetricsToken != "" && subtle.ConstantTimeCompare([]byte(auth.BearerToken(r)), []byte(cfg.MetricsToken)) != 1 {
				WriteError(w, apierr.Auth())
				return
			}
			w.Header().Set("Content-Type", "text/plain; version=0.0.4")
			cfg.Metrics.Write(r.Context(), w)
			if cfg.Uploads != nil && cfg.Uploads.Stager != nil {
				cfg.Uploads.Stager.WriteMetrics(w)
			}
		})
	}
	registerDocs(routes)
	routes.HandleFunc("GET /openapi.json", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(spec.OpenAPI) //nolint:errcheck
	})
	for pattern, h := range cfg.Extra {
		routes.Handle(pattern, h)
	}
	// notServed answers a request no route takes: 405 with Allow when the path is served
	// under other methods (ServeMux says so itself only when no pattern matches the path, and
	// the catch-all below matches every path), else 404.
	notServed := func(w http.ResponseWriter, r *http.Request) {
		if allow := allowedMethods(routes, r); len(allow) > 0 {
			w.Header().Set("Allow", strings.Join(allow, ", "))
			WriteError(w, apierr.MethodNotAllowed())
			return
		}
		WriteError(w, apierr.NotFound())
	}
	routes.HandleFunc("/", notServed)
	// The admin API's own catch-all, more specific than the admin UI's "/admin/" (Extra), so
	// its unknown routes and methods are answered as the agent API's are.
	routes.HandleFunc("/admin/api/", notServed)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// ServeMux would redirect a path with "..", "." or "//" to its cleaned form (echoing
		// the query in Location); the server serves paths only as written.
		if p := r.URL.Path; p == "" || p[0] != '/' || cleanPath(p) != p {
			WriteError(w, apierr.PathNotFound())
			return
		}
		if isAPI(r.URL.Path) {
			// An answer is one caller's data (an inbox, a key shown once): no cache keeps it.
			w.Header().Set("Cache-Control", "no-store")
			if r.Method == http.MethodHead {
				// ServeMux answers a HEAD with a route's GET handler, and an agent's GET is not
				// free of effects (inbox_list records receipts, which make rows ACKable): on the
				// APIs, HEAD is answered as any method no operation declares. Elsewhere it runs
				// the GET: monitors probe /healthz with HEAD; the admin UI's pages, /docs and
				// /openapi.json change nothing.
				notServed(w, r)
				return
			}
		}
		if headerBytes(r) > maxHeaderBytes {
			WriteError(w, apierr.TooLarge("", "headers_too_large", maxHeaderBytes).WithStatus(http.StatusRequestHeaderFieldsTooLarge))
			return
		}
		if r.Body != nil && r.Body != http.NoBody {
			r.Body = &idleBody{ReadCloser: r.Body, conn: http.NewResponseController(w), idle: cfg.BodyIdleTimeout}
		}
		routes.ServeHTTP(w, r)
	})
}

// allowedMethods lists the methods a route declaring its method serves r's path with. HEAD is
// never listed (on the APIs it is refused like any undeclared method, see New), nor are
// routes that take every method and answer for themselves (/mcp, the admin UI).
func allowedMethods(routes *http.ServeMux, r *http.Request) []string {
	var allow []string
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		probe := *r
		probe.Method = m
		if _, pattern := routes.Handler(&probe); strings.HasPrefix(pattern, m+" ") {
			allow = append(allow, m)
		}
	}
	return allow
}

// idleBody is a request body that gives up when nothing arrives for idle: each read may wait
// that long (the connection's read deadline, moved forward by every read). Once the body has
// been read to its end the deadline is cleared, so the rest of the exchange (net/http's
// watch for a closed connection while the handler works) is not cut short; after a timeout
// it stays passed, so net/http does not wait on the rest of that body either.
type idleBody struct {
	io.ReadCloser
	conn *http.ResponseController
	idle time.Duration
	done bool
}

func (b *idleBody) Read(p []byte) (int, error) {
	if b.done {
		return b.ReadCloser.Read(p)
	}
	b.conn.SetReadDeadline(time.Now().Add(b.idle)) //nolint:errcheck // unsupported (a test recorder): no bound
	n, err := b.ReadCloser.Read(p)
	if errors.Is(err, io.EOF) {
		b.done = true
		b.conn.SetReadDeadline(time.Time{}) //nolint:errcheck
	}
	return n, err
}

// UnreadableBody is the answer to a body that could not be read: a stalled one is told
// apart (reason body_timeout) from one the client broke off or garbled.
func UnreadableBody(err error, message string) *apierr.Error {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return apierr.Invalid("", "the request body stopped arriving (nothing came for a while); send it again").WithReason("body_timeout")
	}
	return apierr.Invalid("", message)
}

// isAPI reports whether path is on the agent or admin JSON API or /mcp, whose answers are a
// caller's own data.
func isAPI(path string) bool {
	for _, api := range []string{"/api/", "/admin/api/", "/mcp"} {
		if strings.HasPrefix(path, api) {
			return true
		}
	}
	return false
}

// decodeError is the answer to a body the contract's schema admitted but its Go type cannot
// hold (a JSON integer written 1e3, or beyond 64 bits): it names the field (SPEC §12), never
// the value.
func decodeError(err error) *apierr.Error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		return apierr.Undecodable(te.Field)
	}
	return apierr.Invalid("", "the request body is not valid JSON for this operation")
}

// maxHeaderBytes bounds the request line and headers a handler sees. The listener admits
// more (MaxListenerHeaderBytes) so that this server, not net/http, answers with the error body.
const maxHeaderBytes = 64 << 10

// MaxListenerHeaderBytes is http.Server.MaxHeaderBytes for the serving listener; beyond it
// net/http itself answers 431 in plain text before any handler runs.
const MaxListenerHeaderBytes = 1 << 20

func headerBytes(r *http.Request) int {
	n := len(r.Method) + len(r.URL.RequestURI()) + len(r.Proto)
	for k, vs := range r.Header {
		for _, v := range vs {
			n += len(k) + len(v) + 4
		}
	}
	return n
}

// cleanPath is ServeMux's canonical form of a path (net/http's cleanPath).
func cleanPath(p string) string {
	np := path.Clean(p)
	if p[len(p)-1] == '/' && np != "/" {
		np += "/"
	}
	return np
}

// gate authenticates the caller for op, decodes and validates the JSON body strictly
// (unknown fields, bad UTF-8 and lone surrogates are INVALID_ARGUMENT), then hands the
// request to the generated strict handler.
func gate(cfg Config, op *mcp.Operation, next http.Handler) http.Handler {
	rules := paramRules(op)
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		w := &statusWriter{ResponseWriter: rw, status: http.StatusOK}
		defer func(start time.Time) {
			cfg.Metrics.Observe(op.OperationID, "http", w.status, w.code, time.Since(start))
		}(time.Now())
		ctx := r.Context()
		bearer := auth.BearerToken(r)
		if op.Admin {
			if err := cfg.Auth.Admin(ctx, bearer); err != nil {
				WriteError(w, err)
				return
			}
		} else {
			var p auth.Principal
			var check *store.KeyCheck
			var err error
			if isUpload(op, r) { // nothing is staged for a key before it is checked
				p, err = cfg.Auth.Agent(ctx, bearer, r.PathValue("box_key"), auth.SourceAddr(r))
			} else {
				p, check, err = cfg.Auth.AgentCall(ctx, bearer, r.PathValue("box_key"), auth.SourceAddr(r))
			}
			if err != nil {
				WriteError(w, err)
				return
			}
			if check != nil {
				// The check rides in the call's first round trip (store.KeyCheck); an answer
				// that leaves before any transaction ran it waits for it first (statusWriter).
				ctx = store.WithKeyCheck(ctx, check)
				w.check = newCheckGate(w, func() error { return cfg.Auth.Confirm(ctx, check) }, WriteError)
			}
			header := r.Header.Get(auth.SessionHeader)
			if err := auth.CheckSessionHeader(header); err != nil {
				WriteError(w, err)
				return
			}
			ctx = auth.WithPrincipal(ctx, p)
			ctx = auth.WithSessionKey(ctx, auth.SessionKey(header, "", p.KeyID))
		}
		if err := checkParams(op, rules, r); err != nil {
			WriteError(w, err)
			return
		}
		clampQuery(op, r)
		json, err := bodyMediaType(op, r)
		if err != nil {
			WriteError(w, err)
			return
		}
		if !json && isUpload(op, r) { // a declared multipart body: staged by serveUpload (upload.go)
			serveUpload(cfg, op, w, r.WithContext(ctx), next)
			return
		}
		if json && op.Body != nil { // other declared media types (uploads) are read by their handler
			raw, err := io.ReadAll(io.LimitReader(r.Body, schema.MaxRequestBytes+1))
			if err != nil {
				WriteError(w, UnreadableBody(err, "the request body could not be read"))
				return
			}
			if len(raw) > schema.MaxRequestBytes {
				WriteError(w, apierr.TooLarge("", "request_too_large", schema.MaxRequestBytes))
				return
			}
			if op.Admin { // the body may have come long after the token was checked: a token revoked meanwhile acts no more
				if err := cfg.Auth.Admin(ctx, bearer); err != nil {
					WriteError(w, err)
					return
				}
			}
			if len(bytes.TrimSpace(raw)) == 0 {
				raw = []byte("{}")
			}
			if err := ValidateBody(op, raw); err != nil {
				WriteError(w, err)
				return
			}
			raw = clampBody(raw)
			r.Body = io.NopCloser(bytes.NewReader(raw))
			r.ContentLength = int64(len(raw))
		}
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// bodyMediaType checks the request's Content-Type against the media types the operation's
// requestBody declares in the contract (op.MediaTypes): anything else is 415. It reports
// whether the body is JSON, and leaves the header in its parsed form. A request without a body may omit Content-Type (an empty body is
// the empty object); operations without a requestBody ignore it. An encoded body
// (Content-Encoding other than identity) is 415 too, whatever its type.
func bodyMediaType(op *mcp.Operation, r *http.Request) (json bool, err error) {
	if len(op.MediaTypes) == 0 {
		return false, nil
	}
	if EncodedBody(r) {
		return false, apierr.UnsupportedContentEncoding()
	}
	ct := r.Header.Get("Content-Type")
	if ct == "" && r.ContentLength == 0 {
		return true, nil
	}
	mt, params, perr := mime.ParseMediaType(ct)
	if perr != nil || !slices.Contains(op.MediaTypes, mt) {
		return false, apierr.UnsupportedMediaType(op.MediaTypes...)
	}
	isJSON := mt == "application/json" || strings.HasSuffix(mt, "+json")
	if cs, ok := params["charset"]; ok && isJSON && !strings.EqualFold(cs, "utf-8") {
		return false, apierr.UnsupportedMediaType(op.MediaTypes...) // JSON is UTF-8 (RFC 8259)
	}
	if mt != ct {
		// Media types are case-insensitive (RFC 9110 §8.3.1) but the generated handlers
		// match the header's prefix as written: they see it in the parsed, lower-case form.
		if parsed := mime.FormatMediaType(mt, params); parsed != "" {
			r.Header.Set("Content-Type", parsed)
		}
	}
	return isJSON, nil
}

// EncodedBody reports whether the request declares a body encoding other than identity
// (Content-Encoding: gzip, br, ...): the server reads bodies only as sent.
func EncodedBody(r *http.Request) bool {
	for _, v := range r.Header.Values("Content-Encoding") {
		for coding := range strings.SplitSeq(v, ",") {
			if c := strings.TrimSpace(coding); c != "" && !strings.EqualFold(c, "identity") {
				return true
			}
		}
	}
	return false
}

// paramRule is what an input schema says of a path or query parameter beyond the text
// rule: for a string, the uuid format and the length bounds (in characters); for an object
// (a deepObject query parameter, destination[kind]=dm), the validator of its schema.
type paramRule struct {
	uuid           bool
	minLen, maxLen int // maxLen -1: unbounded
	object         *schema.Validator
}

// paramRules are the rules of op's path and query parameters, read from its input schema.
func paramRules(op *mcp.Operation) map[string]paramRule {
	var in struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if err := json.Unmarshal(op.InputSchema, &in); err != nil {
		panic("httpserver: the input schema of " + op.OperationID + ": " + err.Error()) // generated; cannot happen
	}
	rules := map[string]paramRule{}
	for _, name := range slices.Concat(op.PathParams, op.QueryParams) {
		raw, ok := in.Properties[name]
		var p struct {
			Type      any    `json:"type"`
			Format    string `json:"format"`
			MinLength *int   `json:"minLength"`
			MaxLength *int   `json:"maxLength"`
		}
		if !ok || json.Unmarshal(raw, &p) != nil {
			continue
		}
		if p.Type == "object" {
			// Validated as the same argument of the tool is, so its violations name the
			// member (destination.kind) and read alike on both surfaces.
			doc := `{"type":"object","properties":{` + strconv.Quote(name) + `:` + string(raw) + `}}`
			rules[name] = paramRule{object: schema.MustCompile(op.OperationID+"."+name, []byte(doc))}
			continue
		}
		if p.Type != "string" {
			continue
		}
		r := paramRule{uuid: p.Format == "uuid", maxLen: -1}
		if p.MinLength != nil {
			r.minLen = *p.MinLength
		}
		if p.MaxLength != nil {
			r.maxLen = *p.MaxLength
		}
		rules[name] = r
	}
	return rules
}

// check applies r to the value of parameter name, as the schema validator would to the same
// field in a tool's arguments (so both surfaces answer alike).
func (r paramRule) check(name, v string) error {
	if bad := schema.LengthViolation(name, utf8.RuneCountInString(v), r.minLen, r.maxLen); bad != nil {
		return apierr.FromViolation(bad)
	}
	if r.uuid && !schema.IsUUID(v) {
		return apierr.Invalid(name, "is not a valid uuid") // as the uuid format says it in a body
	}
	return nil
}

// checkParams applies the text rule (SPEC §12: valid UTF-8, no U+0000) to every value bound
// from the path, the query string and header parameters, before anything reaches the
// service, checks path and query values against their schema's format and length bounds as
// strictly as a body's fields are checked (SPEC §9) and refuses a query key outside the
// contract, as an unknown body field is. A value is named by its parameter; a query key
// outside the contract is not echoed.
// checkQueryEncoding refuses a query string that is not valid URL encoding (a '%' not
// followed by two hex digits): Go's parser drops such a pair, and the parameter would then
// read as missing. The field names the pair's parameter when it is one of the operation's.
func checkQueryEncoding(op *mcp.Operation, raw string) error {
	for pair := range strings.SplitSeq(raw, "&") {
		key, value, _ := strings.Cut(pair, "=")
		k, kerr := url.QueryUnescape(key)
		_, verr := url.QueryUnescape(value)
		if kerr == nil && verr == nil {
			continue
		}
		field := ""
		if base, _, _ := strings.Cut(k, "["); kerr == nil && slices.Contains(op.QueryParams, base) {
			field = k
			if base != k {
				field = base
			}
		}
		return apierr.Invalid(field, "the query string is not valid URL encoding: a '%' must start an escape of two hex digits")
	}
	return nil
}

func checkParams(op *mcp.Operation, rules map[string]paramRule, r *http.Request) error {
	for _, name := range op.PathParams {
		if err := schema.CheckText(name, r.PathValue(name)); err != nil {
			return apierr.FromDecode(err)
		}
		if rule, ok := rules[name]; ok {
			if err := rule.check(name, r.PathValue(name)); err != nil {
				return err
			}
		}
	}
	if err := checkQueryEncoding(op, r.URL.RawQuery); err != nil {
		return err
	}
	objects := map[string]map[string]any{} // deepObject parameters by name, their members as sent
	for key, values := range r.URL.Query() {
		field := ""
		base, member, deep := strings.Cut(key, "[")
		if slices.Contains(op.QueryParams, base) {
			field = key
			if deep { // destination[kind]: named destination.kind, as the tool's argument is
				member = strings.TrimSuffix(member, "]")
				field = base + "." + member
				if !schema.NameLike(member) {
					field = base // a member name that is not a name is not echoed
				}
				if objects[base] == nil {
					objects[base] = map[string]any{}
				}
				if len(values) > 0 {
					objects[base][member] = values[0]
				}
			}
		}
		if err := schema.CheckText(field, key); err != nil {
			return apierr.FromDecode(err)
		}
		if field == "" { // as an unknown body field is (SPEC §12): named when the key reads as a name, never echoed otherwise
			unknown := ""
			if schema.NameLike(key) {
				unknown = key
			}
			return apierr.Invalid(unknown, "unknown query parameter; the operation's parameters are in /openapi.json").WithReason("unknown_field")
		}
		for _, v := range values {
			if err := schema.CheckText(field, v); err != nil {
				return apierr.FromDecode(err)
			}
			if rule, ok := rules[field]; ok && rule.object == nil {
				if err := rule.check(field, v); err != nil {
					return err
				}
			}
		}
		if rule, ok := rules[field]; ok && rule.object != nil && !deep {
			// An object parameter sent flat (destination=room): the binder would skip it
			// and the call would run unfiltered, over rows the caller did not ask for.
			return apierr.Invalid(field, "an object parameter is sent as its members, e.g. "+field+"[kind]=…; see the operation's parameters in /openapi.json")
		}
	}
	for name, members := range objects {
		if rule, ok := rules[name]; ok && rule.object != nil {
			if v := rule.object.Validate(map[string]any{name: members}); v != nil {
				return apierr.FromViolation(v) // an unknown member that is no name is not echoed (schema)
			}
		}
	}
	for _, name := range op.HeaderParams {
		if err := schema.CheckText(name, r.Header.Get(name)); err != nil {
			return apierr.FromDecode(err)
		}
	}
	return nil
}

// clampQuery rewrites the query parameters the service clamps (schema.ClampedIntegers) when
// they are integers written in a form the operation's int64 cannot parse (10.0, 1e2, beyond
// 64 bits): "limit is clamped, never rejected" (SPEC §9).
func clampQuery(op *mcp.Operation, r *http.Request) {
	q := r.URL.Query()
	changed := false
	for _, name := range schema.ClampedIntegers {
		vs, ok := q[name]
		if !ok || !slices.Contains(op.QueryParams, name) {
			continue
		}
		for i, v := range vs {
			if n, ok := schema.IntegerText(v); ok && n != v {
				vs[i], changed = n, true
			}
		}
	}
	if changed {
		r.URL.RawQuery = q.Encode()
	}
}

// clampBody is clampQuery for a JSON body's members (the body has passed ValidateBody).
func clampBody(raw []byte) []byte {
	if !slices.ContainsFunc(schema.ClampedIntegers, func(name string) bool { return bytes.Contains(raw, []byte(`"`+name+`"`)) }) {
		return raw
	}
	var members map[string]json.RawMessage
	if json.Unmarshal(raw, &members) != nil || !schema.ClampIntegerMembers(members) {
		return raw
	}
	if out, err := json.Marshal(members); err == nil {
		return out
	}
	return raw
}

// statusWriter remembers the status and error code for metrics and holds the answer for a
// pending credential check (checkGate).
type statusWriter struct {
	http.ResponseWriter
	status int
	code   string // the error code of an error answer (WriteError), "" otherwise
	wrote  bool   // the header has been sent
	check  checkGate
}

// checkGate holds an answer's first byte until the caller's deferred credential check
// (store.KeyCheck) has run, when there is one; a refused credential replaces the answer
// (refuse writes it) and the rest of the answer is dropped.
type checkGate struct {
	confirm func() error
	refuse  func(http.ResponseWriter, error)
	refused bool
	// base is the answer's header as it was before the handler ran (Cache-Control: no-store
	// on the APIs, say): a refusal goes out with it and nothing the handler added, so it is
	// the answer a key never seen gets, header for header (SPEC §2: AUTH_FAILED tells nothing).
	base http.Header
}

// newCheckGate holds w's answer for confirm (see checkGate).
func newCheckGate(w http.ResponseWriter, confirm func() error, refuse func(http.ResponseWriter, error)) checkGate {
	return checkGate{confirm: confirm, refuse: refuse, base: w.Header().Clone()}
}

// open runs the pending check once and reports whether the answer may go out. A refusal is
// written through w, so that its status and code are the ones recorded.
func (w *statusWriter) open() bool {
	g := &w.check
	if g.confirm != nil {
		confirm := g.confirm
		g.confirm = nil
		if err := confirm(); err != nil {
			h := w.Header()
			for k := range h {
				delete(h, k)
			}
			for k, v := range g.base {
				h[k] = v
			}
			g.refuse(w, err)
			g.refused = true // after refuse, whose answer must go out
		}
	}
	return !g.refused
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.open() {
		return
	}
	w.status, w.wrote = code, true
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if !w.open() {
		return len(b), nil
	}
	w.wrote = true
	return w.ResponseWriter.Write(b)
}

// Flush sends what was written (the header too), once the credential check let the answer
// go out.
func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok && w.open() {
		w.wrote = true
		f.Flush()
	}
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// HoldForCheck is w holding its answer until confirm (the request's deferred credential
// check, store.KeyCheck) has run; a refused credential's answer is refuse's instead. It is
// the gate's own writer (statusWriter), for handlers outside the gate (/mcp).
func HoldForCheck(w http.ResponseWriter, confirm func() error, refuse func(http.ResponseWriter, error)) http.ResponseWriter {
	return &statusWriter{ResponseWriter: w, status: http.StatusOK, check: newCheckGate(w, confirm, refuse)}
}

// ValidateBody checks a raw JSON body against the operation's closed body schema.
func ValidateBody(op *mcp.Operation, raw []byte) error {
	if op.Body.Accepts(raw) { // valid as it stands: the handler's decode is the only one
		return nil
	}
	doc, err := schema.DecodeStrict(raw)
	if err != nil {
		return apierr.FromDecode(err)
	}
	if v := op.Body.Validate(doc); v != nil {
		return ViolationError(v)
	}
	return nil
}

// ViolationError is the INVALID_ARGUMENT for a schema violation; it names the field, never the value.
func ViolationError(v *schema.Violation) *apierr.Error {
	return apierr.FromViolation(v)
}

// WriteError writes the error envelope with the code's HTTP status.
func WriteError(w http.ResponseWriter, err error) {
	e, ok := apierr.As(err)
	if !ok {
		e = apierr.Storage()
	}
	if e.HTTPStatus() == http.StatusUnauthorized {
		// RFC 9110 §15.5.2: a 401 names its scheme. On /mcp it also makes clients report a
		// bad key instead of starting OAuth (SPEC §13.2).
		w.Header().Set("WWW-Authenticate", `Bearer realm="agentbox"`)
	}
	if e.Reason == "unsupported_content_encoding" {
		w.Header().Set("Accept-Encoding", "identity") // RFC 7694 §3: the encodings the server reads
	}
	if e.RetryAfterSeconds != nil && *e.RetryAfterSeconds > 0 {
		// The body's retry_after_seconds as HTTP says it (the contract's RateLimited and
		// Unavailable responses), for clients and proxies that read only the header.
		w.Header().Set("Retry-After", strconv.Itoa(*e.RetryAfterSeconds))
	}
	if sw, ok := w.(*statusWriter); ok {
		sw.code = string(e.Code)
	}
	writeJSON(w, e.HTTPStatus(), apierr.Body{Error: e})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v) //nolint:errcheck
}
