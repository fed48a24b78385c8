package store

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/agentbox/agentbox/gen/db"
)

// TakeRateToken takes one token from the key's bucket in PostgreSQL (shared by every server
// process): the bucket refills at perSecond and holds at most capacity tokens. When refused,
// retryAfter is how long until a token is available.
func (s *Store) TakeRateToken(ctx context.Context, boxID, keyID uuid.UUID, perSecond, capacity float64, now time.Time) (ok bool, retryAfter time.Duration, err error) {
	ctx, cancel := s.bounded(ctx)
	defer cancel()
	r, err := db.New(s.pool).TakeRateToken(ctx, db.TakeRateTokenParams{BoxID: boxID, KeyID: keyID, Capacity: capacity, Now: now, PerSecond: perSecond})
	if err != nil {
		return false, 0, classify(err, false)
	}
	if !r.Refused {
		return true, 0, nil
	}
	return false, time.Duration((1 - r.Tokens) / perSecond * float64(time.Second)), nil
}
