package service_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/agentbox/agentbox/internal/cli"
	"github.com/agentbox/agentbox/internal/testenv"
)

// Retention cleanup status (SPEC §11): every retention run that deletes is counted, and a
// lowered cap applies retroactively to every channel of the box as a recorded run.
func TestCleanupStatusAndRetroactiveCleanup(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "a", "b")
	a, b, e := w.agents["a"], w.agents["b"], w.e
	status := func() map[string]any { return e.Admin("GET", "/boxes/alpha/cleanup", nil) }
	if s := status(); s["box_key"] != "alpha" || s["state"] != "idle" || s["runs"] != float64(0) || s["deleted_messages"] != float64(0) ||
		s["failures"] != float64(0) || s["last_run_at"] != nil || s["last_error"] != nil {
		t.Fatalf("fresh status: %v", s)
	}
	// Lowering the cap runs the retroactive cleanup (nothing to delete yet).
	w.settings(map[string]any{"channel_message_cap": 3})
	if s := status(); s["runs"] != float64(1) || s["deleted_messages"] != float64(0) || s["last_run_at"] != e.Clock.Now().UTC().Format(time.RFC3339) {
		t.Fatalf("after lowering on an empty box: %v", s)
	}
	// Retention after each write: the 4th and 5th DM each delete the oldest.
	e.Clock.Advance(time.Minute)
	for i := range 5 {
		ibSend(t, a, dmTo(b), fmt.Sprintf("dm %d", i), nil)
	}
	if s := status(); s["runs"] != float64(3) || s["deleted_messages"] != float64(2) || s["last_run_at"] != e.Clock.Now().UTC().Format(time.RFC3339) {
		t.Fatalf("after sends: %v", s)
	}
	room := w.roomWith(t, a, b)
	for i := range 3 {
		ibSend(t, a, inRoom(room), fmt.Sprintf("post %d", i), nil)
	}
	if got := ibClaim(t, b, map[string]any{"limit": 50}); len(got) != 6 {
		t.Fatalf("claimed %d rows", len(got))
	}
	// Lowering to 1 cleans every channel at once, leased and unread rows included.
	w.settings(map[string]any{"channel_message_cap": 1})
	if s := status(); s["runs"] != float64(4) || s["deleted_messages"] != float64(6) || s["state"] != "idle" {
		t.Fatalf("after lowering to 1: %v", s)
	}
	if n := dbInt(t, e, `SELECT count(*) FROM messages GROUP BY channel_id ORDER BY count(*) DESC LIMIT 1`); n != 1 {
		t.Fatalf("a channel keeps %d messages", n)
	}
	if n := dbInt(t, e, `SELECT count(*) FROM attention WHERE agent_id = $1`, b.ID); n != 2 {
		t.Fatalf("attention rows left: %d", n)
	}
	if p := ibList(t, b, ibPath("", nil, "", 0)); len(p.Items) != 2 || p.LeasedCount != 2 {
		t.Fatalf("inbox after cleanup: %+v", p)
	}
	// Raising a cap (or changing another setting) runs nothing.
	w.settings(map[string]any{"channel_message_cap": 100, "lease_default_seconds": 30})
	if s := status(); s["runs"] != float64(4) {
		t.Fatalf("raising a cap ran a cleanup: %v", s)
	}
	if r := e.Do("GET", "/admin/api/v1/boxes/nosuch/cleanup", testenv.AdminToken, nil, nil); r.Code() != "NOT_FOUND_OR_FORBIDDEN" {
		t.Fatalf("unknown box: %s", r.Raw)
	}
}

// A failed retroactive cleanup stays failed until a cleanup of every channel succeeds (outside
// probe: it was never retried, re-sending the same cap did nothing, and one write's retention
// in one channel reported the box idle while another channel still held more than the cap),
// and its last_error says what kind of failure it was without the database's message.
func TestFailedCleanupIsRetriedUntilEveryChannelIsWithinItsCaps(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "a", "b", "c")
	a, b, c, e := w.agents["a"], w.agents["b"], w.agents["c"], w.e
	ctx := context.Background()
	status := func() map[string]any { return e.Admin("GET", "/boxes/alpha/cleanup", nil) }
	for i := range 5 {
		ibSend(t, a, dmTo(b), fmt.Sprintf("to b %d", i), nil)
		ibSend(t, a, dmTo(c), fmt.Sprintf("to c %d", i), nil)
	}
	largest := func() int64 {
		return dbInt(t, e, `SELECT max(n) FROM (SELECT count(*) AS n FROM messages GROUP BY channel_id) x`)
	}
	// Deleting messages fails while the trigger is there (this test's own database).
	failDeletes := func(on bool) {
		t.Helper()
		q := `DROP TRIGGER IF EXISTS fail_deletes ON messages`
		if on {
			q = `CREATE OR REPLACE FUNCTION fail_deletes() RETURNS trigger LANGUAGE plpgsql AS $$
			     BEGIN RAISE EXCEPTION 'secret-detail-never-shown'; END $$;
			     CREATE TRIGGER fail_deletes BEFORE DELETE ON messages FOR EACH ROW EXECUTE FUNCTION fail_deletes()`
		}
		if _, err := e.Store.Pool().Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	failDeletes(true)
	w.settings(map[string]any{"channel_message_cap": 3})
	s := status()
	if s["state"] != "failed" || s["failures"] != float64(1) || !strings.Contains(fmt.Sprint(s["last_error"]), "SQLSTATE P0001") ||
		strings.Contains(fmt.Sprint(s["last_error"]), "secret-detail") {
		t.Fatalf("after the failed cleanup: %v", s)
	}
	failDeletes(false)
	// One write's retention applies the cap to its channel only: still failed.
	ibSend(t, a, dmTo(b), "to b again", nil)
	if s := status(); s["state"] != "failed" || largest() != 5 {
		t.Fatalf("after a write in one channel: %v, largest channel %d", s, largest())
	}
	// The same cap again runs the cleanup again.
	w.settings(map[string]any{"channel_message_cap": 3})
	if s := status(); s["state"] != "idle" || largest() != 3 {
		t.Fatalf("after the same cap again: %v, largest channel %d", s, largest())
	}
	// And the server's retry runs it by itself.
	failDeletes(true)
	w.settings(map[string]any{"channel_message_cap": 2})
	failDeletes(false)
	if s := status(); s["state"] != "failed" || s["failures"] != float64(2) {
		t.Fatalf("after the second failed cleanup: %v", s)
	}
	if err := e.Service.RetryFailedCleanups(ctx); err != nil {
		t.Fatal(err)
	}
	s = status()
	if s["state"] != "idle" || largest() != 2 {
		t.Fatalf("after the retry: %v, largest channel %d", s, largest())
	}
	if err := e.Service.RetryFailedCleanups(ctx); err != nil || status()["runs"] != s["runs"] {
		t.Fatalf("a retry with nothing failed ran: %v %v", err, status())
	}
}

// The admin CLI shows the cleanup status (not parallel: it sets the CLI's environment).
func TestAdminCLICleanupStatus(t *testing.T) {
	e := testenv.New(t)
	e.Box("alpha")
	t.Setenv("AGENTBOX_SERVER", e.URL)
	t.Setenv("AGENTBOX_ADMIN_TOKEN", testenv.AdminToken)
	var out, errb bytes.Buffer
	if code := cli.Run([]string{"admin", "cleanup", "status", "--box", "alpha"}, strings.NewReader(""), &out, &errb); code != cli.ExitOK {
		t.Fatalf("exit %d: %s %s", code, out.String(), errb.String())
	}
	var s map[string]any
	if err := json.Unmarshal(out.Bytes(), &s); err != nil || s["box_key"] != "alpha" || s["state"] != "idle" || s["runs"] != float64(0) {
		t.Fatalf("cleanup status: %v %s", err, out.String())
	}
	if code := cli.Run([]string{"admin", "cleanup", "status"}, strings.NewReader(""), &out, &errb); code == cli.ExitOK {
		t.Fatal("--box is required")
	}
}

// The channels' message counts (which decide whether a write runs retention) stay exact
// through sends from two servers, batches, duplicates, dry runs, retention after writes and
// the retroactive cleanup, and retention deletes exactly the excess oldest messages — with
// attachments too (set on stored rows here: uploads have their own tests).
func TestChannelCountsStayExact(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "a", "b", "c")
	a, b, c, e := w.agents["a"], w.agents["b"], w.agents["c"], w.e
	room := w.roomWith(t, a, b, c)
	exact := func(when string) {
		t.Helper()
		if n := dbInt(t, e, `SELECT count(*) FROM channels ch
			WHERE message_count <> (SELECT count(*) FROM messages m WHERE m.box_id = ch.box_id AND m.channel_id = ch.channel_id)
			   OR attachment_message_count <> (SELECT count(*) FROM messages m
			                                   WHERE m.box_id = ch.box_id AND m.channel_id = ch.channel_id AND m.has_attachment)`); n != 0 {
			t.Fatalf("%s: %d channels with wrong counts", when, n)
		}
	}
	// The oldest-first rule, per channel: the kept messages are the newest ones.
	kept := func(channel string) []string {
		t.Helper()
		rows, err := e.Store.Pool().Query(context.Background(), `SELECT body_md FROM messages WHERE channel_id = $1 ORDER BY message_seq`, channel)
		if err != nil {
			t.Fatal(err)
		}
		bodies, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		return bodies
	}
	e2 := testenv.Attach(t, e)
	var wg sync.WaitGroup
	for i, s := range []*testenv.Agent{a, b, c} {
		other := *s
		other.Env = e2
		for j, sender := range []*testenv.Agent{s, &other} {
			wg.Go(func() {
				for k := range 4 {
					if r := msSend(sender, inRoom(room), fmt.Sprintf("p%d-%d-%d", i, j, k), nil); r.Status != http.StatusOK {
						t.Errorf("room send: %d %s", r.Status, r.Raw)
					}
				}
			})
		}
	}
	wg.Wait()
	for i := range 3 {
		ibSend(t, a, dmTo(b), fmt.Sprintf("dm %d", i), nil)
	}
	a.MustCall("POST", "/messages/batch", map[string]any{"recipient_agent_ids": []uuid.UUID{b.ID, c.ID}, "body_md": "batch", "idempotency_key": newKey()})
	if r := msSend(a, dmTo(c), "batch", nil); r.JSON()["status"] != "duplicate" {
		t.Fatalf("duplicate: %s", r.Raw)
	}
	if r := msSend(a, dmTo(c), "dry", map[string]any{"dry_run": true}); r.Status != http.StatusOK {
		t.Fatalf("dry run: %s", r.Raw)
	}
	exact("after sends")
	if n := dbInt(t, e, `SELECT message_count FROM channels WHERE channel_id = $1`, room); n != 24 {
		t.Fatalf("room count %d, want 24", n)
	}

	// A lowered cap: the retroactive cleanup keeps the newest 5 of every channel.
	newest := kept(room)[19:]
	w.settings(map[string]any{"channel_message_cap": 5})
	exact("after the retroactive cleanup")
	if got := kept(room); !slices.Equal(got, newest) {
		t.Fatalf("room keeps %v, want %v", got, newest)
	}
	// Retention after each write deletes exactly the excess.
	for i := range 3 {
		ibSend(t, b, inRoom(room), fmt.Sprintf("late %d", i), nil)
	}
	exact("after retention on writes")
	if got := kept(room); !slices.Equal(got, append(newest[3:], "late 0", "late 1", "late 2")) {
		t.Fatalf("room keeps %v", got)
	}

	// Attachment messages: the oldest beyond channel_attachment_cap go, whole.
	if _, err := e.Store.Pool().Exec(context.Background(), `WITH marked AS (
			UPDATE messages SET has_attachment = true WHERE channel_id = $1 AND body_md IN ($2, $3, $4) RETURNING channel_id)
		UPDATE channels SET attachment_message_count = (SELECT count(*) FROM marked) WHERE channel_id = $1`,
		room, newest[4], "late 0", "late 2"); err != nil {
		t.Fatal(err)
	}
	exact("after marking attachments")
	w.settings(map[string]any{"channel_attachment_cap": 1})
	exact("after the attachment cleanup")
	if got := kept(room); !slices.Equal(got, []string{newest[3], "late 1", "late 2"}) {
		t.Fatalf("room keeps %v", got)
	}
	ibSend(t, c, inRoom(room), "last", nil)
	exact("after the last send")
	if s := e.Admin("GET", "/boxes/alpha/cleanup", nil); s["state"] != "idle" || s["failures"] != float64(0) {
		t.Fatalf("cleanup status: %v", s)
	}
}
