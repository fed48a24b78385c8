package store

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/agentbox/agentbox/gen/db"
)

// A claim's scan of unleased rows starts at the agent's claim floor (0017_claim_floor.sql):
// after thousands of rows were worked (their index entries left in attention_claimable until
// VACUUM), the claim reads a few pages, as it does in a new inbox. Without the floor the same
// statement walks every one of those entries: the test shows both, so it measures the walk.
func TestClaimScanStartsAtTheFloor(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	conn := testConn(t)
	// No VACUUM removes the worked rows' entries while the test looks at them.
	if _, err := conn.Exec(ctx, `ALTER TABLE attention SET (autovacuum_enabled = false)`); err != nil {
		t.Fatal(err)
	}
	box, agent, channel := uuid.New(), uuid.New(), uuid.New()
	const worked, fresh = 20000, 2
	if _, err := conn.Exec(ctx, `INSERT INTO boxes (box_id, box_key, created_at) VALUES ($1, 'floor', now())`, box); err != nil {
		t.Fatal(err) // the box and its sequences (0025_box_sequences.sql)
	}
	// DM rows (reasons bit 1: accessible without a message lookup), then all but the last
	// few acked, as a drain leaves them.
	if _, err := conn.Exec(ctx, `INSERT INTO attention (box_id, agent_id, inbox_seq, message_id, channel_id, reasons)
		SELECT $1, $2, nextval(box_inbox_seq($1)), gen_random_uuid(), $3, 1 FROM generate_series(1, $4::int)`,
		box, agent, channel, worked+fresh); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `UPDATE attention SET acked_at = now(), acked_by_session_id = gen_random_uuid()
		WHERE box_id = $1 AND agent_id = $2 AND inbox_seq < (SELECT max(inbox_seq) - $3 + 1 FROM attention WHERE box_id = $1 AND agent_id = $2)`,
		box, agent, fresh); err != nil {
		t.Fatal(err)
	}
	var firstFresh int64
	if err := conn.QueryRow(ctx, `SELECT min(inbox_seq) FROM attention WHERE box_id = $1 AND agent_id = $2 AND acked_at IS NULL`, box, agent).
		Scan(&firstFresh); err != nil {
		t.Fatal(err)
	}

	rec := &recorder{}
	db.New(rec).LockClaimCandidatesOldest(ctx, db.LockClaimCandidatesOldestParams{ //nolint:errcheck // only recorded
		BoxID: box, AgentID: agent, Now: time.Now(), MaxRows: 50})
	buffers := func() int64 {
		t.Helper()
		tx, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx) //nolint:errcheck // the claim's row locks are not kept
		var raw []byte
		if err := tx.QueryRow(ctx, "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) "+rec.sql, rec.args...).Scan(&raw); err != nil {
			t.Fatal(err)
		}
		var out []struct {
			Plan struct {
				Hit  int64 `json:"Shared Hit Blocks"`
				Read int64 `json:"Shared Read Blocks"`
			}
		}
		if err := json.Unmarshal(raw, &out); err != nil || len(out) != 1 {
			t.Fatalf("plan %s: %v", raw, err)
		}
		return out[0].Plan.Hit + out[0].Plan.Read
	}
	buffers() // the first walk marks the dead entries; the figures below are of later walks
	withoutFloor := buffers()

	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.New(tx).AdvanceClaimFloor(ctx, db.AdvanceClaimFloorParams{BoxID: box, AgentID: agent}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	var floor int64
	if err := conn.QueryRow(ctx, `SELECT floor_seq FROM inbox_claim_floors WHERE box_id = $1 AND agent_id = $2`, box, agent).Scan(&floor); err != nil {
		t.Fatal(err)
	}
	if floor != firstFresh {
		t.Fatalf("floor %d, want the first unleased row %d", floor, firstFresh)
	}
	withFloor := buffers()
	t.Logf("claim of 50 after %d rows worked: %d buffers without the floor, %d with it", worked, withoutFloor, withFloor)
	if withFloor > 20 {
		t.Errorf("claim from the floor read %d buffers, want a few pages", withFloor)
	}
	if withoutFloor < 5*withFloor {
		t.Errorf("without the floor the claim read %d buffers, with it %d: the test no longer sees the walk it guards against", withoutFloor, withFloor)
	}
}
