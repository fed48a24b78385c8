package service_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// The claim floor (0017_claim_floor.sql) is where a claim's scan of unleased rows starts. It
// must never pass a row that can still be claimed: a send still in flight with a smaller
// inbox_seq than rows already committed, or rows another claim locked and then gave up.

func boxOf(t *testing.T, w *world, agentID uuid.UUID) uuid.UUID {
	t.Helper()
	var box uuid.UUID
	if err := w.e.Store.Pool().QueryRow(context.Background(), `SELECT box_id FROM agents WHERE agent_id = $1`, agentID).Scan(&box); err != nil {
		t.Fatal(err)
	}
	return box
}

func claimFloor(t *testing.T, w *world, agentID uuid.UUID) int64 {
	t.Helper()
	return dbInt(t, w.e, `SELECT COALESCE(max(floor_seq), 0) FROM inbox_claim_floors WHERE agent_id = $1`, agentID)
}

// A send that drew its inbox_seq and is still in flight holds the inbox's shared lock; a
// claim meanwhile leases a later, committed row and must not raise the floor past the
// in-flight one, which the next claim returns once it commits.
func TestClaimFloorWaitsOutInFlightSends(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "reader", "slow", "fast")
	reader, slow, fast := w.agents["reader"], w.agents["slow"], w.agents["fast"]
	ctx := context.Background()
	pool := w.e.Store.Pool()
	box := boxOf(t, w, reader.ID)

	ibSend(t, slow, dmTo(reader), "first", nil) // creates the DM channel and its counter row
	if got := ibClaim(t, reader, map[string]any{"limit": 10}); len(got) != 1 {
		t.Fatalf("first claim: %+v", got)
	}
	var slowChannel uuid.UUID
	if err := pool.QueryRow(ctx, `SELECT channel_id FROM attention WHERE agent_id = $1`, reader.ID).Scan(&slowChannel); err != nil {
		t.Fatal(err)
	}
	// Hold the slow channel's delivered counter: the next send from slow draws its inbox_seq
	// and inserts its row, then waits on the counter in the same statement (InsertAttention),
	// holding the inbox's shared lock.
	blocker, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer blocker.Rollback(ctx) //nolint:errcheck
	if _, err := blocker.Exec(ctx, `SELECT 1 FROM inbox_delivered WHERE box_id = $1 AND agent_id = $2 AND channel_id = $3 FOR UPDATE`,
		box, reader.ID, slowChannel); err != nil {
		t.Fatal(err)
	}
	sent := make(chan struct{})
	go func() {
		defer close(sent)
		ibSend(t, slow, dmTo(reader), "in flight", nil)
	}()
	waitFor(t, "the slow send to wait on the counter row", func() bool {
		return dbInt(t, w.e, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%InsertAttention%'`) > 0
	})
	ibSend(t, fast, dmTo(reader), "committed", nil)

	got := ibClaim(t, reader, map[string]any{"limit": 10})
	if len(got) != 1 || got[0].Message.BodyMd != "committed" {
		t.Fatalf("claim while a send is in flight: %+v", got)
	}
	if err := blocker.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	<-sent
	var inFlightSeq, committedSeq int64
	if err := pool.QueryRow(ctx, `SELECT
	        (SELECT a.inbox_seq FROM attention a JOIN messages m USING (box_id, message_id) WHERE a.agent_id = $1 AND m.body_md = 'in flight'),
	        (SELECT a.inbox_seq FROM attention a JOIN messages m USING (box_id, message_id) WHERE a.agent_id = $1 AND m.body_md = 'committed')`,
		reader.ID).Scan(&inFlightSeq, &committedSeq); err != nil {
		t.Fatal(err)
	}
	if inFlightSeq >= committedSeq {
		t.Fatalf("setup: the in-flight send drew %d, not below the committed row's %d", inFlightSeq, committedSeq)
	}
	if f := claimFloor(t, w, reader.ID); f > inFlightSeq {
		t.Fatalf("claim floor %d passed the in-flight row %d", f, inFlightSeq)
	}
	got = ibClaim(t, reader, map[string]any{"limit": 10})
	if len(got) != 1 || got[0].Message.BodyMd != "in flight" {
		t.Fatalf("claim after the send committed: %+v", got)
	}
}

// Rows another transaction has locked (as a claim does before it leases) are skipped by a
// concurrent claim, which leases later rows and raises the floor; the floor stops at the
// locked rows, so when that transaction gives them up they are claimed next, oldest first.
func TestClaimFloorStopsAtRowsAnotherClaimHolds(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "reader", "sender")
	reader, sender := w.agents["reader"], w.agents["sender"]
	ctx := context.Background()
	pool := w.e.Store.Pool()
	for i := range 6 {
		ibSend(t, sender, dmTo(reader), fmt.Sprintf("work %d", i), nil)
	}
	holder, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Rollback(ctx) //nolint:errcheck
	rows, err := holder.Query(ctx, `SELECT inbox_seq FROM attention WHERE agent_id = $1 ORDER BY inbox_seq LIMIT 2 FOR UPDATE`, reader.ID)
	if err != nil {
		t.Fatal(err)
	}
	held, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil || len(held) != 2 {
		t.Fatalf("lock rows: %v %v", held, err)
	}
	got := ibClaim(t, reader, map[string]any{"limit": 2})
	if len(got) != 2 || got[0].Message.BodyMd != "work 2" || got[1].Message.BodyMd != "work 3" {
		t.Fatalf("claim past the held rows: %+v", got)
	}
	if f := claimFloor(t, w, reader.ID); f > held[0] {
		t.Fatalf("claim floor %d passed the held row %d", f, held[0])
	}
	if err := holder.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	got = ibClaim(t, reader, map[string]any{"limit": 3})
	if len(got) != 3 || got[0].Message.BodyMd != "work 0" || got[1].Message.BodyMd != "work 1" || got[2].Message.BodyMd != "work 4" {
		t.Fatalf("claim after the held rows were given up: %+v", got)
	}
	if f := claimFloor(t, w, reader.ID); f <= held[1] {
		t.Fatalf("claim floor %d did not pass the rows leased since (%d)", f, held[1])
	}
}

// The floor passes rows leased and acked, and rows of a room the agent left (inaccessible
// for good); a drained inbox's floor sits above its last row, and a later send is claimed.
// The claim's scan then starts at the floor: its cost does not grow with the rows worked
// before it (without the floor it walked every index entry they left until VACUUM).
func TestClaimFloorPassesWorkedRows(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "reader", "sender")
	reader, sender := w.agents["reader"], w.agents["sender"]
	ctx := context.Background()
	pool := w.e.Store.Pool()
	// No VACUUM of this database's attention table while the test looks at its index.
	if _, err := pool.Exec(ctx, `ALTER TABLE attention SET (autovacuum_enabled = false)`); err != nil {
		t.Fatal(err)
	}
	room := w.roomWith(t, sender, reader)
	ibSend(t, sender, inRoom(room), "left behind", nil)
	ibLeave(t, reader, room)
	const worked = 400
	for i := range worked {
		ibSend(t, sender, dmTo(reader), fmt.Sprintf("work %d", i), nil)
	}
	for n := 0; n < worked; {
		got := ibClaim(t, reader, map[string]any{"limit": 50})
		if len(got) == 0 {
			t.Fatalf("claimed %d of %d", n, worked)
		}
		seqs := ibSeqs(got)
		if r := ibAck(reader, newKey(), seqs...); r.Status != 200 {
			t.Fatalf("ack: %d %s", r.Status, r.Raw)
		}
		n += len(got)
	}
	last := dbInt(t, w.e, `SELECT max(inbox_seq) FROM attention WHERE agent_id = $1`, reader.ID)
	if f := claimFloor(t, w, reader.ID); f <= last {
		t.Fatalf("claim floor %d of a drained inbox, want above its last row %d", f, last)
	}
	// The empty claim's scan of unleased rows reads a few pages, not the 400 rows' entries.
	var plan string
	box := boxOf(t, w, reader.ID)
	if err := pool.QueryRow(ctx, `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON)
	        SELECT a.inbox_seq FROM attention a
	        WHERE a.box_id = $1 AND a.agent_id = $2 AND a.acked_at IS NULL AND a.lease_session_id IS NULL
	          AND a.inbox_seq >= (SELECT COALESCE(max(f.floor_seq), 0) FROM inbox_claim_floors f WHERE f.box_id = $1 AND f.agent_id = $2)
	        ORDER BY a.inbox_seq LIMIT 50`, box, reader.ID).Scan(&plan); err != nil {
		t.Fatal(err)
	}
	var explained []struct {
		Plan struct {
			Hit  int64 `json:"Shared Hit Blocks"`
			Read int64 `json:"Shared Read Blocks"`
		}
	}
	if err := json.Unmarshal([]byte(plan), &explained); err != nil || len(explained) != 1 {
		t.Fatalf("plan %s: %v", plan, err)
	}
	if hit := explained[0].Plan.Hit + explained[0].Plan.Read; hit > 20 {
		t.Fatalf("an empty claim from the floor read %d buffers after %d rows were worked:\n%s", hit, worked, plan)
	}
	ibSend(t, sender, dmTo(reader), "new", nil)
	if got := ibClaim(t, reader, map[string]any{"limit": 50}); len(got) != 1 || got[0].Message.BodyMd != "new" {
		t.Fatalf("claim after the drain: %+v", got)
	}
}
