package store

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/agentbox/agentbox/gen/db"
)

// The statements that look up an agent's leases by expiry (the claim's candidates, its
// fallback and InboxCounts) read only the expiry range of attention_lease_expiry, once
// PostgreSQL has settled on generic plans too, and in the state where the planner preferred
// to walk the agent's inbox by attention_pkey (0021_lease_lookups_by_expiry_only.sql): an
// inbox of 1,500 rows, all leased and acked three times over, so that the expiry index holds
// many pages for its few live entries, analyzed in that state. Before 0021 the lookups read
// all 1,500 rows at every call. The nested plans are PostgreSQL's own, reported by
// auto_explain.
func TestLeaseLookupsReadOnlyTheExpiryRange(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	nested := &nestedPlans{}
	conn := explainingConn(t, nested)
	box, agent, session := uuid.New(), uuid.New(), uuid.New()
	at := time.Date(2031, 7, 9, 10, 11, 12, 0, time.UTC)
	churn := []string{
		"SET session_replication_role = replica", // the rows stand alone: no box or agent behind them
		`INSERT INTO attention (box_id, agent_id, inbox_seq, message_id, channel_id, reasons)
		 SELECT $1, $2, s, gen_random_uuid(), gen_random_uuid(), 1 FROM generate_series(1, 1500) AS s`,
		"RESET session_replication_role",
		// Leases as claims of 10 take them, each with its own expiry, then their ACKs.
		`DO $$ BEGIN FOR round IN 1 .. 3 LOOP FOR i IN 0 .. 149 LOOP
		   UPDATE attention SET lease_session_id = gen_random_uuid(),
		          lease_expires_at = TIMESTAMPTZ '2031-07-09 10:11:12+00' + make_interval(secs => inbox_seq + round * 10000),
		          acked_at = NULL, acked_by_session_id = NULL
		   WHERE inbox_seq BETWEEN i * 10 + 1 AND i * 10 + 10;
		 END LOOP; END LOOP; END $$`,
		`UPDATE attention SET lease_session_id = NULL, lease_expires_at = NULL, acked_at = $3, acked_by_session_id = gen_random_uuid()
		 WHERE box_id = $1 AND agent_id = $2 AND inbox_seq <= 1494`,
		// Three of the six leases left have run out.
		`UPDATE attention SET lease_expires_at = $3::timestamptz - interval '1 minute' WHERE box_id = $1 AND agent_id = $2 AND inbox_seq > 1497`,
		"ANALYZE attention",
	}
	for _, s := range churn {
		args := []any{box, agent, at}[:min(3, strings.Count(s, "$")-2*strings.Count(s, "$$"))]
		if _, err := conn.Exec(ctx, s, args...); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	var pages, live float64
	if err := conn.QueryRow(ctx, "SELECT relpages, reltuples FROM pg_class WHERE relname = 'attention_lease_expiry'").Scan(&pages, &live); err != nil {
		t.Fatal(err)
	}
	if pages < 2*live || live < 2 {
		t.Fatalf("attention_lease_expiry holds %v pages for %v live entries: the test no longer builds the churned state it checks", pages, live)
	}
	// Every call runs in a transaction rolled back after it, so each finds the same state.
	lookups := map[string]func(q *db.Queries) error{
		"LockClaimCandidatesOldest": func(q *db.Queries) error {
			_, err := q.LockClaimCandidatesOldest(ctx, db.LockClaimCandidatesOldestParams{BoxID: box, AgentID: agent, Now: at, MaxRows: 20})
			return err
		},
		"LockClaimCandidatesNewest": func(q *db.Queries) error {
			_, err := q.LockClaimCandidatesNewest(ctx, db.LockClaimCandidatesNewestParams{BoxID: box, AgentID: agent, Now: at, MaxRows: 20})
			return err
		},
		"ClaimAccessibleOldest": func(q *db.Queries) error {
			_, err := q.ClaimAccessibleOldest(ctx, db.ClaimAccessibleOldestParams{BoxID: box, AgentID: agent, Now: at, MaxRows: 20})
			return err
		},
		"ClaimAccessibleNewest": func(q *db.Queries) error {
			_, err := q.ClaimAccessibleNewest(ctx, db.ClaimAccessibleNewestParams{BoxID: box, AgentID: agent, Now: at, MaxRows: 20})
			return err
		},
		"InboxCounts": func(q *db.Queries) error {
			_, err := q.InboxCounts(ctx, db.InboxCountsParams{BoxID: box, AgentID: agent, SessionID: session, Now: at})
			return err
		},
	}
	for name, call := range lookups {
		// More calls than PostgreSQL's five custom plans before it considers a generic one.
		for i := range 8 {
			tx, err := conn.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			nested.reset()
			err = call(db.New(tx))
			if rerr := tx.Rollback(ctx); err == nil {
				err = rerr
			}
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			var found bool
			for _, p := range nested.get() {
				// The lookup, not the function's locking of the rows it found, by position.
				if !strings.Contains(p.QueryText, "lease_expires_at") || strings.Contains(p.QueryText, "a.ctid = t") {
					continue
				}
				found = true
				var scans []string
				var walk func(n planNode)
				walk = func(n planNode) {
					if scanRelation(n) == "attention" || n.Relation == "attention" {
						scans = append(scans, n.NodeType+" "+n.IndexName+" ("+n.IndexCond+")")
					}
					for _, c := range n.Plans {
						walk(c)
					}
				}
				walk(p.Plan)
				if len(scans) != 1 || !strings.Contains(scans[0], "attention_lease_expiry") || !strings.Contains(scans[0], "lease_expires_at") {
					t.Errorf("%s, call %d: the lease lookup reads attention by %q: want one range of attention_lease_expiry on lease_expires_at", name, i+1, scans)
				}
			}
			if !found {
				t.Fatalf("%s, call %d: no lease lookup was planned (%d nested plans)", name, i+1, len(nested.get()))
			}
		}
	}
	var generic int64
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_prepared_statements WHERE generic_plans > 0
		AND statement ~ '^-- name: (LockClaimCandidatesOldest|LockClaimCandidatesNewest|ClaimAccessibleOldest|ClaimAccessibleNewest|InboxCounts) '`).Scan(&generic); err != nil {
		t.Fatal(err)
	}
	if generic != int64(len(lookups)) {
		t.Errorf("%d of the %d statements ran a generic plan in 8 calls: the test no longer covers a cached plan around the lookup", generic, len(lookups))
	}
}

// nestedPlans collects the plans auto_explain reports (explainingConn).
type nestedPlans struct {
	mu    sync.Mutex
	plans []explained
}

type explained struct {
	QueryText string   `json:"Query Text"`
	Plan      planNode `json:"Plan"`
}

func (n *nestedPlans) reset() { n.mu.Lock(); n.plans = nil; n.mu.Unlock() }

func (n *nestedPlans) get() []explained {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.plans
}

func (n *nestedPlans) add(msg string) {
	_, js, ok := strings.Cut(msg, "plan:\n")
	if !ok {
		return
	}
	var e explained
	if json.Unmarshal([]byte(js), &e) == nil {
		n.mu.Lock()
		n.plans = append(n.plans, e)
		n.mu.Unlock()
	}
}

// explainingConn connects to a fresh test database as the store's pool would, with
// auto_explain sending the plan of every statement, nested ones included, to into.
func explainingConn(t *testing.T, into *nestedPlans) *pgx.Conn {
	t.Helper()
	conn := noticeConn(t, into)
	enableAutoExplain(t, conn)
	return conn
}

// enableAutoExplain has PostgreSQL send the plan of every statement conn runs from now on,
// those run inside functions included, as a notice.
func enableAutoExplain(t *testing.T, conn *pgx.Conn) {
	t.Helper()
	for _, s := range []string{"LOAD 'auto_explain'", "SET auto_explain.log_min_duration = 0", "SET auto_explain.log_nested_statements = on",
		"SET auto_explain.log_format = json", "SET auto_explain.log_level = notice"} {
		if _, err := conn.Exec(context.Background(), s); err != nil {
			t.Fatalf("%s: %v (auto_explain ships with the PostgreSQL server; LOAD needs a superuser)", s, err)
		}
	}
}

// The claim's fallback (ClaimAccessibleOldest/Newest) never returns a row the agent can no
// longer read, in its expired-lease branch too (inbox_lock_expired_leases with
// accessible_only), where the claim's candidates return such a row flagged inaccessible. Row
// 1 is a room row with no active membership behind it, row 2 a DM row; both hold leases of
// another session that have run out.
func TestClaimFallbackPassesExpiredLeasesTheAgentCannotRead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	conn := testConn(t)
	box, agent, holder := uuid.New(), uuid.New(), uuid.New()
	now := time.Date(2031, 7, 9, 10, 11, 12, 0, time.UTC)
	if _, err := conn.Exec(ctx, `INSERT INTO attention (box_id, agent_id, inbox_seq, message_id, channel_id, reasons, lease_session_id, lease_expires_at)
		VALUES ($1, $2, 1, gen_random_uuid(), gen_random_uuid(), 2, $3, $4), ($1, $2, 2, gen_random_uuid(), gen_random_uuid(), 1, $3, $4)`,
		box, agent, holder, now.Add(-time.Minute)); err != nil {
		t.Fatal(err)
	}
	q := db.New(conn)
	candidates, err := q.LockClaimCandidatesOldest(ctx, db.LockClaimCandidatesOldestParams{BoxID: box, AgentID: agent, Now: now, MaxRows: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(candidates) != 2 || candidates[0].Accessible || !candidates[1].Accessible {
		t.Fatalf("candidates %+v: want row 1 inaccessible and row 2 accessible (the test no longer sets up what it checks)", candidates)
	}
	oldest, err := q.ClaimAccessibleOldest(ctx, db.ClaimAccessibleOldestParams{BoxID: box, AgentID: agent, Now: now, MaxRows: 10})
	if err != nil {
		t.Fatal(err)
	}
	newest, err := q.ClaimAccessibleNewest(ctx, db.ClaimAccessibleNewestParams{BoxID: box, AgentID: agent, Now: now, MaxRows: 10})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(oldest) != "[2]" || fmt.Sprint(newest) != "[2]" {
		t.Fatalf("fallback oldest %v, newest %v: want [2] (row 1 cannot be read)", oldest, newest)
	}
}

// The fallback's expired-lease lookup checks accessibility only for the rows it takes, not
// for every expired lease of the agent (0021_lease_lookups_by_expiry_only.sql): with 400
// expired leases on rows of a room the agent reads, a claim of 20 probes the membership 20
// times, oldest first and newest first. Before, it probed once per expired lease.
func TestClaimFallbackChecksOnlyTheExpiredLeasesItTakes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	nested := &nestedPlans{}
	conn := explainingConn(t, nested)
	if _, err := conn.Exec(ctx, "SET auto_explain.log_analyze = on"); err != nil {
		t.Fatal(err)
	}
	box, agent, room, holder := uuid.New(), uuid.New(), uuid.New(), uuid.New()
	now := time.Date(2031, 7, 9, 10, 11, 12, 0, time.UTC)
	const expired, take = 400, 20
	setup := []string{
		// The rows stand alone: no box, agent or room rows behind them.
		"SET session_replication_role = replica",
		`INSERT INTO room_members (box_id, room_id, agent_id, state, epoch) VALUES ($1, $3, $2, 'active', 1)`,
		`INSERT INTO attention (box_id, agent_id, inbox_seq, message_id, channel_id, reasons, lease_session_id, lease_expires_at)
		 SELECT $1, $2, s, gen_random_uuid(), $3, 2, $4, $5 FROM generate_series(1, 400) AS s`,
		"RESET session_replication_role",
		"ANALYZE attention",
	}
	for _, s := range setup {
		args := []any{box, agent, room, holder, now.Add(-time.Minute)}[:strings.Count(s, "$")]
		if _, err := conn.Exec(ctx, s, args...); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	for _, order := range []string{"oldest", "newest"} {
		tx, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		nested.reset()
		var got []int64
		if order == "oldest" {
			got, err = db.New(tx).ClaimAccessibleOldest(ctx, db.ClaimAccessibleOldestParams{BoxID: box, AgentID: agent, Now: now, MaxRows: take})
		} else {
			got, err = db.New(tx).ClaimAccessibleNewest(ctx, db.ClaimAccessibleNewestParams{BoxID: box, AgentID: agent, Now: now, MaxRows: take})
		}
		if err != nil {
			t.Fatalf("%s: %v", order, err)
		}
		if err := tx.Rollback(ctx); err != nil {
			t.Fatal(err)
		}
		first, last := int64(1), int64(take)
		if order == "newest" {
			first, last = expired-take+1, expired
		}
		if len(got) != take || min(got[0], got[len(got)-1]) != first || max(got[0], got[len(got)-1]) != last {
			t.Fatalf("%s: claimed %v: want rows %d..%d", order, got, first, last)
		}
		// Every statement the call ran, the function's own included (auto_explain reports
		// each): the membership probes of the whole claim.
		var probes float64
		for _, p := range nested.get() {
			var walk func(n planNode)
			walk = func(n planNode) {
				if n.Relation == "room_members" {
					probes += n.Loops
				}
				for _, c := range n.Plans {
					walk(c)
				}
			}
			walk(p.Plan)
		}
		if probes != take {
			t.Errorf("%s: the lookup probed room_members %v times for %d rows out of %d expired leases: want one probe per row taken", order, probes, take, expired)
		}
	}
}
