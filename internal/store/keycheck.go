package store

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"

	"github.com/agentbox/agentbox/gen/db"
)

// KeyCheck is an agent key's credential check deferred into the first round trip of the
// call's transaction (store.InTx), ahead of the call's own statements. The caller's identity
// is already known (package auth caches the facts of a key that never change: its box,
// agent and host), so the call's statements need not wait for the check; what can change —
// the key revoked, the box or agent disabled, the source IP, a rate limit — is checked in
// the same round trip, before any result of the call is used, and a refusal rolls the call
// back. A call that answers without a transaction runs the check on its own first
// (Store.ConfirmKeyCheck): no answer leaves before the credential was checked.
type KeyCheck struct {
	BoxKey string
	Hash   []byte
	// Admit judges the credential read for this call: nil lets it go on. A non-nil limit
	// asks for a token of the key's rate limit before it goes on.
	Admit func(KeyCredential, error) (*RateLimit, error)

	ran bool
	err error
}

// RateLimit is the token a call must take from its key's bucket; Deny is the error when the
// bucket is empty for retryAfter.
type RateLimit struct {
	BoxID, KeyID        uuid.UUID
	PerSecond, Capacity float64
	Now                 time.Time
	Deny                func(retryAfter time.Duration) error
}

type keyCheckKey struct{}

// WithKeyCheck makes k the credential check of the calls made with ctx.
func WithKeyCheck(ctx context.Context, k *KeyCheck) context.Context {
	return context.WithValue(ctx, keyCheckKey{}, k)
}

// pendingKeyCheck is ctx's credential check when it has not run yet.
func pendingKeyCheck(ctx context.Context) *KeyCheck {
	k, _ := ctx.Value(keyCheckKey{}).(*KeyCheck)
	if k == nil || k.ran {
		return nil
	}
	return k
}

// ConfirmKeyCheck runs k on its own unless it has run, and returns its outcome. It holds no
// connection while it waits for one (a rate-limit token is taken on its own connection).
func (s *Store) ConfirmKeyCheck(ctx context.Context, k *KeyCheck) error {
	return s.confirmKeyCheck(ctx, k, true)
}

// ConfirmKeyCredential is ConfirmKeyCheck without the rate-limit token the check may ask
// for: for an answer its transport does not rate limit.
func (s *Store) ConfirmKeyCredential(ctx context.Context, k *KeyCheck) error {
	return s.confirmKeyCheck(ctx, k, false)
}

func (s *Store) confirmKeyCheck(ctx context.Context, k *KeyCheck, token bool) error {
	ctx, cancel := s.bounded(ctx)
	defer cancel()
	if k.ran {
		return k.err
	}
	cred, err := s.KeyCredential(ctx, k.BoxKey, k.Hash)
	limit, err := k.Admit(cred, err)
	if err == nil && limit != nil && token {
		err = takeToken(ctx, db.New(s.pool), limit)
	}
	k.ran, k.err = true, err
	return err
}

// settleUnreadCheck settles a check its call's transaction was to carry but could not, the
// database being unavailable (err, classified): the check is judged on that failure (Admit
// refuses nothing for it; the call's answer is this unavailability) instead of being run again
// on its own by ConfirmKeyCheck, which would only wait for the same database a second time and
// double the call's bound before its answer leaves.
func settleUnreadCheck(k *KeyCheck, err error) {
	if k == nil || k.ran || !errors.Is(err, ErrUnavailable) {
		return
	}
	_, k.err = k.Admit(KeyCredential{}, err)
	k.ran = true
}

func takeToken(ctx context.Context, q *db.Queries, l *RateLimit) error {
	r, err := q.TakeRateToken(ctx, db.TakeRateTokenParams{BoxID: l.BoxID, KeyID: l.KeyID, Capacity: l.Capacity, Now: l.Now, PerSecond: l.PerSecond})
	switch {
	case err != nil:
		return err
	case r.Refused:
		return l.Deny(time.Duration((1 - r.Tokens) / l.PerSecond * float64(time.Second)))
	}
	return nil
}

// checkStep is k as the first step of the transaction's first round trip; a refusal is the
// round trip's first error, so no later step's result is used.
func (c *txConn) checkStep(ctx context.Context, k *KeyCheck) step {
	return func(q *db.Queries) error {
		r, err := one(q.AuthenticateKey(ctx, db.AuthenticateKeyParams{BoxKey: k.BoxKey, KeyHash: k.Hash}))
		if err == errQueued {
			return err
		}
		c.limit, k.err = k.Admit(credentialFrom(r), err)
		k.ran = true
		return k.err
	}
}

// takeCheckToken takes the token a check asked for, in the transaction (with its call).
func (c *txConn) takeCheckToken(ctx context.Context) error {
	l := c.limit
	c.limit = nil
	if l == nil {
		return nil
	}
	return takeToken(ctx, db.New(c), l)
}
