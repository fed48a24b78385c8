package service_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentbox/agentbox/internal/testenv"
)

// The last_seen_at observation never makes a call wait: while another transaction holds the
// agent's row (another session writing the same observation), a call that finds the
// observation due skips it and answers; the next call writes it.
func TestLastSeenObservationNeverWaits(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "a")
	a := w.agents["a"]
	a.Prime()
	ctx := context.Background()
	if _, err := w.e.Store.Pool().Exec(ctx, `UPDATE agents SET last_seen_at = NULL WHERE agent_id = $1`, a.ID); err != nil {
		t.Fatal(err)
	}
	holder, err := pgx.Connect(ctx, w.e.DBURL)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close(ctx)
	tx, err := holder.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SELECT 1 FROM agents WHERE agent_id = $1 FOR NO KEY UPDATE`, a.ID); err != nil {
		t.Fatal(err)
	}
	done := make(chan testenv.Response, 1)
	go func() { done <- a.Call("GET", "/checkpoint", nil) }()
	select {
	case r := <-done:
		if r.Status != http.StatusOK {
			t.Fatalf("checkpoint_get while the agent row is held: %d %s", r.Status, r.Raw)
		}
	case <-time.After(10 * time.Second):
		tx.Rollback(ctx) //nolint:errcheck // lets the blocked call finish
		<-done
		t.Fatal("checkpoint_get waited for the transaction holding the agent's row")
	}
	if n := dbInt(t, w.e, `SELECT count(*) FROM agents WHERE agent_id = $1 AND last_seen_at IS NOT NULL`, a.ID); n != 0 {
		t.Fatalf("last_seen_at written through a held row lock")
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	a.MustCall("GET", "/checkpoint", nil)
	if n := dbInt(t, w.e, `SELECT count(*) FROM agents WHERE agent_id = $1 AND last_seen_at IS NOT NULL`, a.ID); n != 1 {
		t.Fatalf("last_seen_at not written once the row was free")
	}
}
