package store

import (
	"context"
	"time"

	"github.com/agentbox/agentbox/gen/db"
)

// Admin web UI sessions (migration admin_ui_sessions): keyed by the SHA-256 of the cookie's
// session ID, shared by every server instance.

// CreateUISession stores a new session and sweeps expired ones (sign-ins are rare).
func (s *Store) CreateUISession(ctx context.Context, idHash, tokenHash []byte, csrf string, now, idleBefore, createdBefore time.Time) error {
	ctx, cancel := s.bounded(ctx)
	defer cancel()
	q := db.New(s.pool)
	if err := q.SweepAdminUISessions(ctx, db.SweepAdminUISessionsParams{IdleBefore: idleBefore, CreatedBefore: createdBefore}); err != nil {
		return classify(err, false)
	}
	return classify(q.CreateAdminUISession(ctx, db.CreateAdminUISessionParams{SessionHash: idHash, TokenHash: tokenHash, Csrf: csrf, Now: now}), false)
}

// TouchUISession returns the live session's token hash (SHA-256 of the admin token it
// signed in with) and CSRF token and marks it used; found is false for none or an expired one.
func (s *Store) TouchUISession(ctx context.Context, idHash []byte, now, idleBefore, createdBefore time.Time) (tokenHash []byte, csrf string, found bool, err error) {
	ctx, cancel := s.bounded(ctx)
	defer cancel()
	r, err := one(db.New(s.pool).TouchAdminUISession(ctx, db.TouchAdminUISessionParams{Now: now, SessionHash: idHash, IdleBefore: idleBefore, CreatedBefore: createdBefore}))
	switch {
	case err == ErrNotFound:
		return nil, "", false, nil
	case err != nil:
		return nil, "", false, classify(err, false)
	}
	return r.TokenHash, r.Csrf, true, nil
}

// EndUISession deletes a session.
func (s *Store) EndUISession(ctx context.Context, idHash []byte) error {
	ctx, cancel := s.bounded(ctx)
	defer cancel()
	return classify(db.New(s.pool).EndAdminUISession(ctx, idHash), false)
}

// SetUISessionFlash stores the one-time notice for the session's next page.
func (s *Store) SetUISessionFlash(ctx context.Context, idHash []byte, msg string) error {
	ctx, cancel := s.bounded(ctx)
	defer cancel()
	return classify(db.New(s.pool).SetAdminUISessionFlash(ctx, db.SetAdminUISessionFlashParams{Flash: msg, SessionHash: idHash}), false)
}

// TakeUISessionFlash returns and clears the session's notice.
func (s *Store) TakeUISessionFlash(ctx context.Context, idHash []byte) (string, error) {
	ctx, cancel := s.bounded(ctx)
	defer cancel()
	msg, err := one(db.New(s.pool).TakeAdminUISessionFlash(ctx, idHash))
	if err == ErrNotFound {
		return "", nil
	}
	return msg, classify(err, false)
}
