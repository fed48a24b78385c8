package adminui

import (
	"log/slog"
	"net/http"
	"strings"

	"github.com/agentbox/agentbox/internal/apierr"
	"github.com/agentbox/agentbox/internal/auth"
)

// signinForm shows the sign-in form with a fresh double-submit nonce: the same random value
// in a cookie and in the form. A cross-site page can submit the form but cannot read or set
// the cookie, so it cannot sign a browser in to a session of its choosing (login CSRF).
func (u *UI) signinForm(w http.ResponseWriter, r *http.Request) {
	nonce := randomToken()
	setCookie(w, r, signinCookie, nonce, int(signinTTL.Seconds()))
	u.render(w, http.StatusOK, "signin", page{Title: "Sign in", Data: nonce})
}

// signin validates the admin token with the same check as the admin API (AGENTBOX_ADMIN_TOKEN
// or a live issued token) and starts a new session; a failure sets no cookie at all.
func (u *UI) signin(w http.ResponseWriter, r *http.Request) {
	nonce := cookieValue(r, signinCookie)
	if !u.checkPost(w, r, nonce) {
		return
	}
	token := strings.TrimSpace(r.PostForm.Get("token"))
	if err := u.auth.Admin(r.Context(), token); apierr.IsUnavailable(err) {
		u.render(w, http.StatusServiceUnavailable, "signin", page{Title: "Sign in", Data: nonce,
			Error: &banner{Title: "Sign-in is temporarily unavailable; try again shortly."}})
		return
	} else if err != nil {
		u.render(w, http.StatusUnauthorized, "signin", page{Title: "Sign in", Data: nonce,
			Error: &banner{Title: "Sign-in failed: that is not a valid admin token."}})
		return
	}
	if old := cookieValue(r, sessionCookie); old != "" {
		u.sessions.end(r.Context(), old) // never carry a previous session ID over a sign-in
	}
	id, err := u.sessions.create(r.Context(), auth.HashSecret(token))
	if err != nil {
		u.log.ErrorContext(r.Context(), "admin UI sign-in", slog.Any("err", err))
		u.render(w, http.StatusServiceUnavailable, "signin", page{Title: "Sign in", Data: nonce,
			Error: &banner{Title: "Sign-in is temporarily unavailable; try again shortly."}})
		return
	}
	setCookie(w, r, sessionCookie, id, 0)
	setCookie(w, r, signinCookie, "", -1)
	http.Redirect(w, r, "/admin/boxes", http.StatusSeeOther)
}

func (u *UI) signout(c *call) {
	u.sessions.end(c.r.Context(), c.sid)
	setCookie(c.w, c.r, sessionCookie, "", -1)
	http.Redirect(c.w, c.r, "/admin/signin", http.StatusSeeOther)
}
