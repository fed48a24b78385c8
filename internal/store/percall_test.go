package store

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/agentbox/agentbox/gen/db"
	"github.com/agentbox/agentbox/internal/testdb"
)

// The claim statements and InboxCounts are never prepared, so PostgreSQL plans them with their
// parameters at every call and never settles on a generic plan (percall.go says why); the other
// statements stay prepared.
func TestLeaseStatementsArePlannedPerCall(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	u, err := url.Parse(testdb.New(t))
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("pool_max_conns", "1")
	u.RawQuery = q.Encode()
	s, err := Open(ctx, u.String())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	box, agent := uuid.New(), uuid.New()
	prepared := map[string]bool{}
	err = s.InTx(ctx, func(tx *Tx) error {
		// More calls than PostgreSQL's five custom plans before it considers a generic one.
		for range 7 {
			for _, newest := range []bool{false, true} {
				if _, err := tx.LockClaimable(ctx, box, agent, newest, 20, time.Now()); err != nil {
					return err
				}
			}
			for _, q := range []func() error{
				func() error {
					_, err := tx.q.ClaimAccessibleOldest(ctx, db.ClaimAccessibleOldestParams{BoxID: box, AgentID: agent, Now: time.Now(), MaxRows: 20})
					return err
				},
				func() error {
					_, err := tx.q.ClaimAccessibleNewest(ctx, db.ClaimAccessibleNewestParams{BoxID: box, AgentID: agent, Now: time.Now(), MaxRows: 20})
					return err
				},
			} {
				if err := q(); err != nil {
					return err
				}
			}
			if _, err := tx.InboxCounts(ctx, box, agent, uuid.New(), time.Now()); err != nil {
				return err
			}
			if _, err := tx.InboxRows(ctx, box, agent, []int64{1, 2}); err != nil {
				return err
			}
		}
		rows, err := tx.c.conn.Query(ctx, `SELECT substring(statement from '^-- name: (\w+)') FROM pg_prepared_statements WHERE statement LIKE '-- name: %'`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var name string
			if err := rows.Scan(&name); err != nil {
				return err
			}
			prepared[name] = true
		}
		return rows.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"LockClaimCandidatesOldest", "LockClaimCandidatesNewest", "ClaimAccessibleOldest", "ClaimAccessibleNewest", "InboxCounts"} {
		if prepared[name] {
			t.Errorf("%s is a prepared statement: a generic plan may replace its per-call plans", name)
		}
	}
	if !prepared["InboxRows"] {
		t.Errorf("InboxRows is not prepared (prepared: %v): the test no longer sees prepared statements", prepared)
	}
}

// A statement planned per call cannot ride in a pipeline, which would send it prepared.
func TestPipelineRefusesAStatementPlannedPerCall(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, err := Open(ctx, testdb.New(t))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	err = s.InTx(ctx, func(tx *Tx) error {
		return tx.pipeline(ctx, func(q *db.Queries) error {
			_, err := q.LockClaimCandidatesOldest(ctx, db.LockClaimCandidatesOldestParams{BoxID: uuid.New(), AgentID: uuid.New(), Now: time.Now(), MaxRows: 1})
			return err
		})
	})
	if err == nil || !strings.Contains(err.Error(), "planned per call") {
		t.Fatalf("pipelined LockClaimCandidatesOldest: err %v, want a refusal", err)
	}
}
