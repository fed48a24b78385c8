// Package auth authenticates agents and admins (SPEC §2) for every transport, and carries
// the authenticated principal and the transport's session key in the request context.
package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/agentbox/agentbox/internal/apierr"
	"github.com/agentbox/agentbox/internal/boxkey"
	"github.com/agentbox/agentbox/internal/secretlike"
	"github.com/agentbox/agentbox/internal/store"
)

// Principal is an authenticated agent. Identity comes from the credential only.
type Principal struct {
	BoxID     uuid.UUID
	BoxKey    string
	AgentID   uuid.UUID
	AgentName string
	HostName  string
	KeyID     uuid.UUID
	Router    bool
}

// Authenticator checks agent keys and admin tokens.
type Authenticator struct {
	store      *store.Store
	adminToken string
	log        *slog.Logger

	mu         sync.Mutex
	identities map[string]Principal // key hash → the identity of a key that has acted (see AgentCall)
}

// knownLimit bounds the identities AgentCall remembers (when full, it starts again).
const knownLimit = 10_000

// New returns an authenticator. adminToken is AGENTBOX_ADMIN_TOKEN ("" disables it).
func New(s *store.Store, adminToken string, log *slog.Logger) *Authenticator {
	return &Authenticator{store: s, adminToken: adminToken, log: log}
}

// Agent authenticates a bearer key for boxKey from the TCP source address. Every failure is
// the same AUTH_FAILED; the cause goes only to the server log.
func (a *Authenticator) Agent(ctx context.Context, bearer, boxKey string, source netip.Addr) (Principal, error) {
	if bearer == "" {
		return a.admit(ctx, store.KeyCredential{}, store.ErrNotFound, source, "missing bearer key")
	}
	if !boxkey.Valid(boxKey) {
		// Permanent, like any credential failure, and never sent to the database.
		return a.admit(ctx, store.KeyCredential{}, store.ErrNotFound, source, "malformed box_key")
	}
	return a.agent(ctx, HashSecret(bearer), boxKey, source)
}

// agent is Agent for a well-formed credential: the key is looked up and admitted, and then
// known (AgentCall).
func (a *Authenticator) agent(ctx context.Context, hash []byte, boxKey string, source netip.Addr) (Principal, error) {
	cred, err := a.store.KeyCredential(ctx, boxKey, hash)
	p, err := a.admit(ctx, cred, err, source, "unknown key for this box_key")
	a.remember(hash, p, cred, err)
	return p, err
}

// AgentCall is Agent for a call of the agent API that will run in one transaction. The
// identity of a key — its box, agent, host and kind — never changes, so once a key has acted
// on this process its identity is known without asking the database, and the check of what
// can change (revoked, box or agent disabled, source IP, rate limit: admit's rules) is
// returned as a store.KeyCheck that runs first in the first round trip of the call's
// transaction (store.InTx), or on its own before any answer that leaves without one
// (Confirm). The check is never cached: revocation takes effect at the next call. Keys of
// boxes with a rate limit, and keys not seen yet, are checked now, as Agent does (the rate
// limit's token is taken here), and their credential is checked again in the same place as a
// known key's: the body of a call may arrive long after its headers, and a key revoked (or an
// agent or box disabled, or a host's IPs changed) meanwhile must not write.
func (a *Authenticator) AgentCall(ctx context.Context, bearer, boxKey string, source netip.Addr) (Principal, *store.KeyCheck, error) {
	if bearer == "" || !boxkey.Valid(boxKey) {
		p, err := a.Agent(ctx, bearer, boxKey, source)
		return p, nil, err
	}
	const notFound = "unknown key for this box_key"
	hash := HashSecret(bearer)
	if p, check, ok := a.known(ctx, hash, boxKey, source, notFound); ok {
		return p, check, nil
	}
	p, err := a.agent(ctx, hash, boxKey, source)
	if err != nil {
		return p, nil, err
	}
	return p, a.recheck(ctx, hash, p, source, notFound), nil
}

// AgentKeyCall is AgentCall for the /mcp endpoint, whose key names no box (box_key arrives
// with each tool call, which must name the returned Principal.BoxKey): the key is looked up
// across boxes, with the checks and the failure of Agent, except that it takes no rate-limit
// token: on /mcp only a tools/call that runs a tool is
// rate limited, and its refusal is that call's tool error (SPEC §12), which only the call can
// answer. limit is the rate limit of a key checked up front (its box sets one; nil
// otherwise): the call takes its token with TakeToken when it runs. The check of a known key
// takes the token of a limit its box has started since, in the call's transaction, as
// AgentCall's does; ConfirmCredential confirms an answer without a transaction, taking none.
func (a *Authenticator) AgentKeyCall(ctx context.Context, bearer string, source netip.Addr) (p Principal, check *store.KeyCheck, limit *store.RateLimit, err error) {
	const notFound = "unknown key"
	if bearer == "" {
		_, err := a.check(ctx, store.KeyCredential{}, store.ErrNotFound, source, "missing bearer key")
		return Principal{}, nil, nil, err
	}
	hash := HashSecret(bearer)
	if p, check, ok := a.known(ctx, hash, "", source, notFound); ok {
		return p, check, nil, nil
	}
	cred, err := a.store.KeyCredentialAnyBox(ctx, hash)
	p, err = a.check(ctx, cred, err, source, notFound)
	a.remember(hash, p, cred, err)
	if err != nil {
		return Principal{}, nil, nil, err
	}
	return p, a.recheck(ctx, hash, p, source, notFound), a.limit(cred), nil
}

// known is the identity of a key that has acted, with the deferred check of this call,
// when the key is known (in box boxKey, or any box when boxKey is "").
func (a *Authenticator) known(ctx context.Context, hash []byte, boxKey string, source netip.Addr, notFound string) (Principal, *store.KeyCheck, bool) {
	a.mu.Lock()
	p, ok := a.identities[string(hash)]
	a.mu.Unlock()
	if !ok || boxKey != "" && p.BoxKey != boxKey {
		return Principal{}, nil, false
	}
	return p, a.deferredCheck(ctx, hash, p, source, notFound, false), true
}

// remember keeps the identity of a key that was just admitted, unless its box sets a rate
// limit (those keys are checked up front, where the token is taken).
func (a *Authenticator) remember(hash []byte, p Principal, cred store.KeyCredential, err error) {
	if err != nil || a.limit(cred) != nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.identities == nil || len(a.identities) >= knownLimit {
		a.identities = map[string]Principal{}
	}
	a.identities[string(hash)] = p
}

// recheck is the deferred check of a key admitted up front (its rate-limit token taken):
// admit's rules without the rate limit, on the credential the call's transaction reads.
func (a *Authenticator) recheck(ctx context.Context, hash []byte, p Principal, source netip.Addr, notFound string) *store.KeyCheck {
	return a.deferredCheck(ctx, hash, p, source, notFound, true)
}

// deferredCheck is the check of known key p, admit's rules on the credential the call's
// transaction reads (without the rate limit when the call was admitted up front).
func (a *Authenticator) deferredCheck(ctx context.Context, hash []byte, p Principal, source netip.Addr, notFound string, admitted bool) *store.KeyCheck {
	return &store.KeyCheck{BoxKey: p.BoxKey, Hash: hash, Admit: func(cred store.KeyCredential, err error) (*store.RateLimit, error) {
		now, err := a.check(ctx, cred, err, source, notFound)
		switch {
		case err != nil:
			if !apierr.IsUnavailable(err) { // an outage refuses nothing
				a.forget(hash)
			}
			return nil, err
		case now.AgentID != p.AgentID || now.KeyID != p.KeyID: // a key's identity never changes
			a.forget(hash)
			return nil, apierr.Auth()
		case admitted:
			return nil, nil
		}
		limit := a.limit(cred)
		if limit != nil {
			a.forget(hash) // its box now sets a rate limit: its next calls are checked up front
		}
		return limit, nil
	}}
}

// Confirm runs a deferred credential check on its own unless it has run (an answer is about
// to leave without a transaction) and returns its outcome.
// The request's context may already be cancelled (a body that stopped arriving ends the
// connection's reads): the check runs regardless, so the answer is the right one.
func (a *Authenticator) Confirm(ctx context.Context, k *store.KeyCheck) error {
	return a.store.ConfirmKeyCheck(context.WithoutCancel(ctx), k)
}

// ConfirmCredential is Confirm for an answer its transport does not rate limit (/mcp's
// protocol requests, and tool calls refused before they run): a rate-limit token the check
// asks for is not taken.
func (a *Authenticator) ConfirmCredential(ctx context.Context, k *store.KeyCheck) error {
	return a.store.ConfirmKeyCredential(context.WithoutCancel(ctx), k)
}

func (a *Authenticator) forget(hash []byte) {
	a.mu.Lock()
	delete(a.identities, string(hash))
	a.mu.Unlock()
}

// admit applies the credential checks of SPEC §2 to a looked-up key: live key, enabled box
// and agent, exact source IP. notFound is the logged cause when the lookup found nothing.
func (a *Authenticator) admit(ctx context.Context, cred store.KeyCredential, err error, source netip.Addr, notFound string) (Principal, error) {
	p, err := a.check(ctx, cred, err, source, notFound)
	if err != nil {
		return Principal{}, err
	}
	if err := a.rateLimit(ctx, cred); err != nil {
		return Principal{}, err
	}
	return p, nil
}

// check is admit without the rate limit.
func (a *Authenticator) check(ctx context.Context, cred store.KeyCredential, err error, source netip.Addr, notFound string) (Principal, error) {
	fail := func(cause string) (Principal, error) {
		a.log.LogAttrs(ctx, slog.LevelWarn, "agent authentication failed", slog.String("cause", cause), slog.String("source", source.String()))
		return Principal{}, apierr.Auth()
	}
	switch {
	case err == store.ErrNotFound:
		return fail(notFound)
	case err != nil:
		a.log.ErrorContext(ctx, "agent authentication lookup", slog.Any("err", err))
		return Principal{}, apierr.Unavailable()
	case cred.Revoked:
		return fail("revoked key")
	case !cred.BoxEnabled:
		return fail("disabled box")
	case !cred.AgentEnabled:
		return fail("disabled agent")
	case !source.IsValid() || !slices.Contains(cred.HostIPs, source.Unmap().String()):
		return fail("source IP not registered for the host")
	}
	return Principal{BoxID: cred.BoxID, BoxKey: cred.BoxKey, AgentID: cred.AgentID, AgentName: cred.AgentName,
		HostName: cred.HostName, KeyID: cred.KeyID, Router: cred.Router}, nil
}

// rateLimit applies the box's per-key rate limit (SPEC §11; off while rate_limit_per_second
// is 0, its default) to an authenticated key: RATE_LIMITED, retryable, with retry_after_seconds.
// The bucket lives in PostgreSQL, so the limit holds for the key across every server instance.
func (a *Authenticator) rateLimit(ctx context.Context, cred store.KeyCredential) error {
	return a.TakeToken(ctx, a.limit(cred))
}

// TakeToken takes one token of the rate limit l (nil: none) for a call about to run:
// RATE_LIMITED, retryable with retry_after_seconds, when the key's bucket is empty.
func (a *Authenticator) TakeToken(ctx context.Context, l *store.RateLimit) error {
	if l == nil {
		return nil
	}
	ok, wait, err := a.store.TakeRateToken(ctx, l.BoxID, l.KeyID, l.PerSecond, l.Capacity, l.Now)
	if err != nil {
		a.log.ErrorContext(ctx, "rate limit", slog.Any("err", err))
		return apierr.Unavailable()
	}
	if ok {
		return nil
	}
	return l.Deny(wait)
}

// limit is the key's rate limit (the box's settings), nil while there is none.
func (a *Authenticator) limit(cred store.KeyCredential) *store.RateLimit {
	var limits struct {
		PerSecond int64 `json:"rate_limit_per_second"`
		Burst     int64 `json:"rate_limit_burst"`
	}
	if len(cred.BoxSettings) > 0 {
		json.Unmarshal(cred.BoxSettings, &limits) //nolint:errcheck // stored by the service, already validated
	}
	if limits.PerSecond <= 0 {
		return nil
	}
	return &store.RateLimit{BoxID: cred.BoxID, KeyID: cred.KeyID, PerSecond: float64(limits.PerSecond),
		Capacity: float64(max(limits.Burst, limits.PerSecond, 1)), Now: time.Now(), Deny: rateLimited}
}

func rateLimited(wait time.Duration) error {
	return apierr.New(apierr.RateLimited, "too many requests for this key").
		WithRetryAfter(max(1, int(math.Ceil(wait.Seconds())))).WithSuggestion("retry after retry_after_seconds with the same idempotency_key")
}

// Admin authenticates an admin bearer token: AGENTBOX_ADMIN_TOKEN or an issued admin token.
func (a *Authenticator) Admin(ctx context.Context, bearer string) error {
	if bearer != "" && a.adminToken != "" && subtle.ConstantTimeCompare([]byte(bearer), []byte(a.adminToken)) == 1 {
		return nil
	}
	if bearer != "" {
		ok, err := a.store.AdminTokenLive(ctx, HashSecret(bearer))
		if err != nil {
			// The token could not be checked: an outage, not a bad credential.
			a.log.ErrorContext(ctx, "admin authentication lookup", slog.Any("err", err))
			return apierr.Unavailable()
		}
		if ok {
			return nil
		}
	}
	a.log.WarnContext(ctx, "admin authentication failed")
	return apierr.Auth()
}

// AdminHash is Admin for a credential known only by its hash (HashSecret): the admin UI
// keeps the hash of the token a session signed in with and checks it on every request.
func (a *Authenticator) AdminHash(ctx context.Context, hash []byte) error {
	if len(hash) == 0 {
		return apierr.Auth()
	}
	if a.adminToken != "" && subtle.ConstantTimeCompare(hash, HashSecret(a.adminToken)) == 1 {
		return nil
	}
	ok, err := a.store.AdminTokenLive(ctx, hash)
	if err != nil {
		a.log.ErrorContext(ctx, "admin authentication lookup", slog.Any("err", err))
		return apierr.Unavailable()
	}
	if !ok {
		return apierr.Auth()
	}
	return nil
}

// BearerToken extracts the token of an "Authorization: Bearer <token>" header.
func BearerToken(r *http.Request) string {
	h := r.Header.Get("Authorization")
	if len(h) > 7 && strings.EqualFold(h[:7], "bearer ") {
		return strings.TrimSpace(h[7:])
	}
	return ""
}

// SourceAddr is the TCP peer address of the request, IPv4-mapped IPv6 normalized.
// Forwarded-IP headers are deliberately ignored.
func SourceAddr(r *http.Request) netip.Addr {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	addr, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Addr{}
	}
	return addr.Unmap()
}

// NormalizeIP parses an exact IP address for a host registration (no CIDR, no names).
func NormalizeIP(s string) (string, bool) {
	addr, err := netip.ParseAddr(s)
	if err != nil || addr.Zone() != "" {
		return "", false
	}
	return addr.Unmap().String(), true
}

// HashSecret is the stored form of an API key or admin token.
func HashSecret(secret string) []byte {
	sum := sha256.Sum256([]byte(secret))
	return sum[:]
}

// The prefixes of the credentials this product issues (defined with the rule that
// recognizes them, internal/secretlike). The service's credential rules reject anything
// shaped like them (prefix + base64url) in payloads and file URLs.
const (
	AgentKeyPrefix   = secretlike.AgentKeyPrefix
	AdminTokenPrefix = secretlike.AdminTokenPrefix
)

// NewSecret returns a fresh random credential with a recognizable prefix ("abk_" for agent keys).
func NewSecret(prefix string) string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	return prefix + base64.RawURLEncoding.EncodeToString(b)
}

type ctxKey int

const (
	principalKey ctxKey = iota
	sessionKeyKey
)

// WithPrincipal stores the authenticated agent in ctx.
func WithPrincipal(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, principalKey, p)
}

// PrincipalFrom returns the authenticated agent of ctx.
func PrincipalFrom(ctx context.Context) (Principal, bool) {
	p, ok := ctx.Value(principalKey).(Principal)
	return p, ok
}

// SessionKey is the one rule of SPEC §3 for choosing the session: the Agentbox-Session
// header when present, else the MCP session ID, else the ID of the API key.
func SessionKey(header, mcpSessionID string, keyID uuid.UUID) string {
	switch {
	case header != "":
		return "header:" + header
	case mcpSessionID != "":
		return "mcp:" + mcpSessionID
	default:
		return "key:" + keyID.String()
	}
}

// SessionHeader is the request header that names the session (SPEC §3).
const SessionHeader = "Agentbox-Session"

// CheckSessionHeader enforces the header's published bound: at most 128 printable ASCII
// characters (absent is fine).
func CheckSessionHeader(h string) error {
	for i := 0; i < len(h); i++ { // first: a byte count of other text is no character count
		if h[i] < 0x20 || h[i] > 0x7e {
			return apierr.Invalid(SessionHeader, "the session header must be printable ASCII")
		}
	}
	if len(h) > 128 {
		return apierr.Invalid(SessionHeader, "the session header is longer than 128 characters")
	}
	return nil
}

// WithSessionKey stores the transport's session key in ctx.
func WithSessionKey(ctx context.Context, key string) context.Context {
	return context.WithValue(ctx, sessionKeyKey, key)
}

// SessionKeyFrom returns the session key of ctx.
func SessionKeyFrom(ctx context.Context) string {
	k, _ := ctx.Value(sessionKeyKey).(string)
	return k
}
