package adminui

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"sync"
	"time"
)

// Sessions are server-side and in memory: the cookie holds only an opaque random ID, never
// the admin token. The token stays in this process's memory so that every request checks it
// again (a revoked issued token ends its UI sessions at once). Consequences, by design: a
// restart signs everyone out, and with several server instances a browser must reach the
// instance it signed in on (or sign in again).
const (
	sessionCookie = "agentbox_admin"        // the session ID
	signinCookie  = "agentbox_admin_signin" // the sign-in form's double-submit nonce
	cookiePath    = "/admin"

	idleTimeout = 30 * time.Minute // a session unused this long ends
	maxLifetime = 8 * time.Hour    // and none lives longer than this
	signinTTL   = 10 * time.Minute // how long a sign-in form stays valid
)

type session struct {
	token         string // the admin token, in memory only
	csrf          string // the synchronizer token every state-changing form carries
	created, seen time.Time
	flash         string // a one-time notice for the next page
}

type sessions struct {
	mu  sync.Mutex
	m   map[string]*session
	now func() time.Time
}

func newSessions() *sessions {
	return &sessions{m: map[string]*session{}, now: time.Now}
}

// create starts a session for a validated admin token and returns its ID.
func (s *sessions) create(token string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	for id, x := range s.m { // sweep: sign-ins are rare, so this stays cheap
		if s.expired(x, now) {
			delete(s.m, id)
		}
	}
	id := randomToken()
	s.m[id] = &session{token: token, csrf: randomToken(), created: now, seen: now}
	return id
}

func (s *sessions) expired(x *session, now time.Time) bool {
	return now.Sub(x.seen) > idleTimeout || now.Sub(x.created) > maxLifetime
}

// lookup returns the live session's token and CSRF token, and marks it used.
func (s *sessions) lookup(id string) (token, csrf string, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	x, ok := s.m[id]
	if !ok {
		return "", "", false
	}
	now := s.now()
	if s.expired(x, now) {
		delete(s.m, id)
		return "", "", false
	}
	x.seen = now
	return x.token, x.csrf, true
}

func (s *sessions) end(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, id)
}

func (s *sessions) setFlash(id, msg string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if x, ok := s.m[id]; ok {
		x.flash = msg
	}
}

func (s *sessions) takeFlash(id string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	x, ok := s.m[id]
	if !ok {
		return ""
	}
	msg := x.flash
	x.flash = ""
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
