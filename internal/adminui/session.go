package adminui

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"log/slog"
	"net/http"
	"time"
)

// Sessions are server-side, in PostgreSQL (SessionStore), so any server instance serves a
// signed-in browser and a restart signs nobody out. The cookie holds only an opaque random
// ID; the database holds its SHA-256 and the SHA-256 of the admin token, never the token, and
// every request checks that token again (a revoked issued token ends its UI sessions at once).
const (
	sessionCookie = "agentbox_admin"        // the session ID
	signinCookie  = "agentbox_admin_signin" // the sign-in form's double-submit nonce
	cookiePath    = "/admin"

	idleTimeout = 30 * time.Minute // a session unused this long ends
	maxLifetime = 8 * time.Hour    // and none lives longer than this
	signinTTL   = 10 * time.Minute // how long a sign-in form stays valid
)

// SessionStore keeps the sessions (internal/store implements it).
type SessionStore interface {
	CreateUISession(ctx context.Context, idHash, tokenHash []byte, csrf string, now, idleBefore, createdBefore time.Time) error
	TouchUISession(ctx context.Context, idHash []byte, now, idleBefore, createdBefore time.Time) (tokenHash []byte, csrf string, found bool, err error)
	EndUISession(ctx context.Context, idHash []byte) error
	SetUISessionFlash(ctx context.Context, idHash []byte, msg string) error
	TakeUISessionFlash(ctx context.Context, idHash []byte) (string, error)
}

type sessions struct {
	st  SessionStore
	log *slog.Logger
	now func() time.Time
}

func newSessions(st SessionStore, log *slog.Logger) *sessions {
	return &sessions{st: st, log: log, now: time.Now}
}

func hashID(id string) []byte { sum := sha256.Sum256([]byte(id)); return sum[:] }

// create starts a session for a validated admin token and returns its ID.
func (s *sessions) create(ctx context.Context, tokenHash []byte) (string, error) {
	now := s.now()
	id := randomToken()
	err := s.st.CreateUISession(ctx, hashID(id), tokenHash, randomToken(), now, now.Add(-idleTimeout), now.Add(-maxLifetime))
	return id, err
}

// lookup returns the live session's token hash and CSRF token, and marks it used.
// lookup finds a live session (and extends its idle time). An error is an outage: the caller
// must not treat it as signed out.
func (s *sessions) lookup(ctx context.Context, id string) (tokenHash []byte, csrf string, ok bool, err error) {
	if id == "" {
		return nil, "", false, nil
	}
	now := s.now()
	tokenHash, csrf, found, err := s.st.TouchUISession(ctx, hashID(id), now, now.Add(-idleTimeout), now.Add(-maxLifetime))
	if err != nil {
		s.log.WarnContext(ctx, "admin UI session lookup", slog.Any("err", err))
		return nil, "", false, err
	}
	return tokenHash, csrf, found, nil
}

func (s *sessions) end(ctx context.Context, id string) {
	if err := s.st.EndUISession(ctx, hashID(id)); err != nil {
		s.log.WarnContext(ctx, "admin UI session end", slog.Any("err", err))
	}
}

func (s *sessions) setFlash(ctx context.Context, id, msg string) {
	if err := s.st.SetUISessionFlash(ctx, hashID(id), msg); err != nil {
		s.log.WarnContext(ctx, "admin UI notice", slog.Any("err", err))
	}
}

func (s *sessions) takeFlash(ctx context.Context, id string) string {
	msg, err := s.st.TakeUISessionFlash(ctx, hashID(id))
	if err != nil {
		s.log.WarnContext(ctx, "admin UI notice", slog.Any("err", err))
	}
	return msg
}

// randomToken is 256 random bits, URL-safe.
func randomToken() string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

func sameToken(a, b string) bool {
	return a != "" && subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

// setCookie writes a UI cookie: HttpOnly, SameSite=Strict, Path=/admin, Secure on TLS.
// maxAge 0 makes a browser-session cookie; negative deletes the cookie.
func setCookie(w http.ResponseWriter, r *http.Request, name, value string, maxAge int) {
	http.SetCookie(w, &http.Cookie{
		Name: name, Value: value, Path: cookiePath, MaxAge: maxAge,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil,
	})
}

func cookieValue(r *http.Request, name string) string {
	c, err := r.Cookie(name)
	if err != nil {
		return ""
	}
	return c.Value
}
