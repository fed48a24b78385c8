// Package mcphttp serves the MCP tool surface over streamable HTTP at /mcp (SPEC §13.2):
// the SDK's stateless handler (any instance serves any request), behind the Origin
// allow-list (with CORS for the allowed Origins: cors.go) and the same agent authentication
// as the HTTP API, calling the service in process through the generated dispatch table. A
// single tools/call POST is answered without the SDK's per-request session, by the same
// handlers and in the same bytes (fastpath.go says why and which requests).
package mcphttp

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"time"

	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbox/agentbox/gen/api"
	genmcp "github.com/agentbox/agentbox/gen/mcp"
	"github.com/agentbox/agentbox/internal/apierr"
	"github.com/agentbox/agentbox/internal/auth"
	"github.com/agentbox/agentbox/internal/httpserver"
	"github.com/agentbox/agentbox/internal/mcpserver"
	"github.com/agentbox/agentbox/internal/metrics"
	"github.com/agentbox/agentbox/internal/store"
)

// Config wires the /mcp endpoint.
type Config struct {
	Service api.StrictServerInterface
	Auth    *auth.Authenticator
	// AllowedOrigins are the exact Origin values a request may carry. A request with an
	// Origin header not listed is refused 403 before authentication; empty refuses every
	// present Origin. Requests without Origin (non-browser clients) are allowed.
	AllowedOrigins []string
	Version        string
	Log            *slog.Logger
	// Metrics records every tool call by operation (nil: not recorded).
	Metrics *metrics.Registry

	sdkOnly bool // tests: every request through the SDK, to compare with the fast path
}

// maxRequestBytes bounds a JSON-RPC request (the HTTP API's body bound plus the envelope).
const maxRequestBytes = 2 << 20

// New returns the /mcp handler.
func New(cfg Config) http.Handler {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	b := &inProcess{svc: cfg.Service, auth: cfg.Auth, log: cfg.Log, metrics: cfg.Metrics}
	full, fullCalls := mcpserver.Build(b, mcpserver.Options{Version: cfg.Version, Log: cfg.Log})
	router, routerCalls := mcpserver.Build(b, mcpserver.Options{Router: true, Version: cfg.Version, Log: cfg.Log})
	sdk := mcp.NewStreamableHTTPHandler(func(r *http.Request) *mcp.Server {
		if p, ok := auth.PrincipalFrom(r.Context()); ok && p.Router {
			return router
		}
		return full
	}, &mcp.StreamableHTTPOptions{
		Stateless:    true,
		JSONResponse: true, // no server-to-client messages: one JSON answer per request
		Logger:       mcpserver.WarnOnly(cfg.Log),
		// The Origin allow-list below and the bearer key guard against DNS rebinding; the
		// SDK's loopback Host check would refuse a same-host reverse proxy.
		DisableLocalhostProtection: true,
		MaxRequestBodyBytes:        maxRequestBytes,
	})
	// The SDK hands tool handlers the request's verified token info; it carries the
	// principal authenticated below.
	withPrincipal := sdkauth.RequireBearerToken(func(_ context.Context, _ string, r *http.Request) (*sdkauth.TokenInfo, error) {
		if ti := tokenInfo(r); ti != nil {
			return ti, nil
		}
		return nil, sdkauth.ErrInvalidToken
	}, &sdkauth.RequireBearerTokenOptions{AllowMissingExpiration: true})(sdk)

	var fast *fastCalls
	if !cfg.sdkOnly {
		fast = newFastCalls(fullCalls, routerCalls)
	}
	protocolErrors := withProtocolErrors(withPrincipal, fast)

	allowed := map[string]bool{}
	for _, o := range cfg.AllowedOrigins {
		allowed[strings.ToLower(strings.TrimSpace(o))] = true
	}
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		start := time.Now()
		unescaper := &htmlUnescaper{ResponseWriter: rw}
		defer unescaper.flushHeld()
		var w http.ResponseWriter = unescaper
		// A request refused before any JSON-RPC method runs (Origin, credentials, session
		// header) is counted under the endpoint: no tool was called.
		refuse := func(w http.ResponseWriter, err error) {
			httpserver.WriteError(w, err)
			e, ok := apierr.As(err)
			if !ok {
				e = apierr.Storage()
			}
			observeRefusal(cfg.Metrics, e.HTTPStatus(), e, start)
		}
		if origin, present := r.Header["Origin"]; present {
			if len(origin) != 1 || !allowed[strings.ToLower(origin[0])] {
				refused := apierr.New(apierr.NotFoundOrForbidden, "requests from this Origin are refused: it is not in the server's MCP Origin allow-list (--mcp-allowed-origin)").
					WithReason("origin_not_allowed")
				writeStatus(w, http.StatusForbidden, refused)
				observeRefusal(cfg.Metrics, http.StatusForbidden, refused, start)
				return
			}
			if isPreflight(r) { // before authentication: a preflight carries no credentials (cors.go)
				writePreflight(w, origin[0])
				return
			}
			w = &corsWriter{ResponseWriter: w, origin: origin[0]}
		}
		ctx := r.Context()
		// No rate-limit token is taken here (auth.AgentKeyCall): a refused tools/call is a tool
		// error, as over stdio (SPEC §12), and only the call can answer one (inProcess.Call
		// takes the token). initialize, tools/list, ping and the other protocol requests are
		// not rate limited: they read no box data and cost no more than the authentication
		// that admitted them, and over stdio they never reach the server at all.
		p, check, limit, err := cfg.Auth.AgentKeyCall(ctx, auth.BearerToken(r), auth.SourceAddr(r))
		if err != nil {
			refuse(w, err) // a 401 carries WWW-Authenticate: Bearer (SPEC §13.2)
			return
		}
		if check != nil {
			// A known key's check rides in the tool call's transaction (auth.AgentKeyCall);
			// the answer waits for it, and a refused key is the HTTP 401 it always was.
			ctx = store.WithKeyCheck(ctx, check)
			// (A tool call the check refuses is counted by Call; only its answer becomes the 401.)
			w = httpserver.HoldForCheck(w, func() error { return confirmUnlessUnavailable(cfg.Auth.ConfirmCredential(ctx, check)) }, httpserver.WriteError)
		}
		if limit != nil {
			ctx = context.WithValue(ctx, rateLimitKey{}, limit)
		}
		ctx = auth.WithPrincipal(ctx, p)
		// SPEC §3: the Agentbox-Session header, else the MCP session ID (the stateless
		// handler has none), else the key's lane.
		header := r.Header.Get(auth.SessionHeader)
		if err := auth.CheckSessionHeader(header); err != nil {
			refuse(w, err)
			return
		}
		ctx = auth.WithSessionKey(ctx, auth.SessionKey(header, "", p.KeyID))
		protocolErrors.ServeHTTP(w, r.WithContext(ctx))
	})
}

// endpointOperation is the operation label of /mcp requests refused before any tool ran.
const endpointOperation = "mcp"

// observeRefusal counts a request to /mcp refused before any method ran.
func observeRefusal(m *metrics.Registry, status int, e *apierr.Error, start time.Time) {
	m.Observe(endpointOperation, "mcp", status, string(e.Code), time.Since(start))
}

// Refused counts a tool call refused before it ran (mcpserver.RefusalRecorder), as Call
// counts the calls it runs.
func (b *inProcess) Refused(_ context.Context, op *genmcp.Operation, e *apierr.Error, d time.Duration) {
	b.metrics.Observe(op.OperationID, "mcp", e.HTTPStatus(), string(e.Code), d)
}

// confirmUnlessUnavailable lets a held answer out when its key's check could not run because
// the database is unavailable. The check of a key this process already admitted runs here only
// when no transaction ran it, and every transaction that reads the box runs it first; so the
// answer is a tool error (this very unavailability, or a bad argument) or a protocol answer
// (initialize, tools/list), none of which holds box data. Sent as it is, a tool call's error
// reaches the model as SPEC §12 says (isError, retryable) instead of an HTTP 503 that MCP
// clients report as a transport failure. A refused key is still the 401.
func confirmUnlessUnavailable(err error) error {
	if apierr.IsUnavailable(err) {
		return nil
	}
	return err
}

func writeStatus(w http.ResponseWriter, status int, e *apierr.Error) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(apierr.Body{Error: e}) //nolint:errcheck
}

const (
	principalExtra  = "agentbox.principal"
	sessionKeyExtra = "agentbox.session_key"
	rateLimitExtra  = "agentbox.rate_limit"
)

// rateLimitKey holds, in a request's context, the rate limit each of its tool calls takes a
// token from (a key checked up front whose box sets one).
type rateLimitKey struct{}

// inProcess runs tools on the service in this process, as the authenticated principal.
type inProcess struct {
	svc     api.StrictServerInterface
	auth    *auth.Authenticator
	log     *slog.Logger
	metrics *metrics.Registry
}

// tokenInfo is the SDK's verified token info for an authenticated request (nil: none).
func tokenInfo(r *http.Request) *sdkauth.TokenInfo {
	p, ok := auth.PrincipalFrom(r.Context())
	if !ok {
		return nil
	}
	limit, _ := r.Context().Value(rateLimitKey{}).(*store.RateLimit)
	return &sdkauth.TokenInfo{UserID: p.AgentID.String(), Extra: map[string]any{
		principalExtra: p, sessionKeyExtra: auth.SessionKeyFrom(r.Context()), rateLimitExtra: limit,
	}}
}

func principalOf(req *mcp.CallToolRequest) (auth.Principal, string, bool) {
	if req == nil || req.Extra == nil || req.Extra.TokenInfo == nil {
		return auth.Principal{}, "", false
	}
	p, ok := req.Extra.TokenInfo.Extra[principalExtra].(auth.Principal)
	sk, _ := req.Extra.TokenInfo.Extra[sessionKeyExtra].(string)
	return p, sk, ok
}

// CheckBox: the key authenticated at the HTTP level belongs to one box; every call must
// name it (SPEC §2), else the one AUTH_FAILED.
func (b *inProcess) CheckBox(ctx context.Context, req *mcp.CallToolRequest, boxKey string) error {
	p, _, ok := principalOf(req)
	if !ok || p.BoxKey != boxKey {
		b.log.LogAttrs(ctx, slog.LevelWarn, "agent authentication failed", slog.String("cause", "box_key is not the key's box"))
		return apierr.Auth()
	}
	return nil
}

func (b *inProcess) Call(ctx context.Context, req *mcp.CallToolRequest, op *genmcp.Operation, args map[string]json.RawMessage) (_ json.RawMessage, err error) {
	defer func(start time.Time) {
		status, code := http.StatusOK, ""
		if err != nil {
			e, ok := apierr.As(err)
			if !ok {
				e = apierr.Storage()
			}
			status, code = e.HTTPStatus(), string(e.Code)
		}
		b.metrics.Observe(op.OperationID, "mcp", status, code, time.Since(start))
	}(time.Now())
	var boxKey string
	json.Unmarshal(args["box_key"], &boxKey) //nolint:errcheck // validated by the input schema
	if err := b.CheckBox(ctx, req, boxKey); err != nil {
		return nil, err
	}
	// The call's rate-limit token (auth.AgentKeyCall), after the box check as over HTTP: a
	// refusal is this call's RATE_LIMITED, a tool error counted above like any other.
	limit, _ := req.Extra.TokenInfo.Extra[rateLimitExtra].(*store.RateLimit)
	if err := b.auth.TakeToken(ctx, limit); err != nil {
		return nil, err
	}
	p, sessionKey, _ := principalOf(req)
	ctx = auth.WithSessionKey(auth.WithPrincipal(ctx, p), sessionKey)
	var headers map[string]string
	if h := req.Extra.Header.Get("Agentbox-Session"); h != "" {
		headers = map[string]string{"Agentbox-Session": h}
	}
	res, err := genmcp.DispatchWithHeaders(ctx, b.svc, op.OperationID, args, headers)
	if err != nil {
		return nil, err
	}
	if body, ok := res.(genmcp.Encoded); ok { // the service's validated bytes, as they are
		return json.RawMessage(body), nil
	}
	return mcpserver.Marshal(res)
}
