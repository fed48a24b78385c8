package store

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/agentbox/agentbox/gen/db"
	"github.com/agentbox/agentbox/internal/testdb"
)

func TestMain(m *testing.M) { testdb.Main(m) }

// Plans that survive new boxes (issue 10): in a database holding a large, analyzed old box,
// every hot statement about a box created after that ANALYZE must reach its rows by index on
// their keys — no sequential scan of a box table, no scan of a history table that only an
// owner prefix (box, agent, channel, sender) bounds, which a nested loop repeats over a whole
// box's history. Each statement is explained twice: planned for its arguments (custom plan)
// and as the generic plan PostgreSQL caches after a few executions. Then each runs under its
// generic plan for the old box's busiest agent, and no scan that only an owner bounds may run
// more than once (what the estimates of a new box cannot show).

// seedBoxSQL creates one box the way the service would leave it: agents with sessions, rooms
// with members, room and DM history, attention rows (acknowledged, unread and leased),
// receipts, requests and duplicate references. $1 box, $2 agents, $3 rooms, $4 messages.
const seedBoxSQL = `
WITH b AS (INSERT INTO boxes (box_id, box_key, created_at) VALUES ($1::uuid, $1::uuid::text, '2026-01-01') RETURNING box_id),
h AS (INSERT INTO hosts (box_id, host_id, name, ips, created_at)
      SELECT box_id, box_id, 'local', '{127.0.0.1}', '2026-01-01' FROM b RETURNING host_id)
SELECT 1 FROM h;
INSERT INTO agents (box_id, agent_id, host_id, name, created_at)
SELECT $1, seed_id($1, 'agent', g), $1, 'agent-' || g, '2026-01-01' FROM generate_series(1, $2) g;
INSERT INTO sessions (box_id, session_id, agent_id, session_key_hash, observed_profile_version, created_at)
SELECT $1, seed_id($1, 'session', g), seed_id($1, 'agent', g), sha256(convert_to($1::uuid::text || g, 'UTF8')), 1, '2026-01-01'
FROM generate_series(1, $2) g;
INSERT INTO api_keys (box_id, key_id, agent_id, key_hash, created_at)
SELECT $1, seed_id($1, 'key', g), seed_id($1, 'agent', g), sha256(convert_to('key' || $1::text || g, 'UTF8')), '2026-01-01'
FROM generate_series(1, $2) g;
INSERT INTO channels (box_id, channel_id, kind, created_at)
SELECT $1, seed_id($1, 'room', g), 'room', '2026-01-01' FROM generate_series(1, $3) g;
INSERT INTO channels (box_id, channel_id, kind, dm_agent_lo, dm_agent_hi, created_at)
SELECT $1, seed_id($1, 'dm', g), 'dm', least(seed_id($1, 'agent', 1), seed_id($1, 'agent', g)),
       greatest(seed_id($1, 'agent', 1), seed_id($1, 'agent', g)), '2026-01-01'
FROM generate_series(2, $2) g;
INSERT INTO rooms (box_id, room_id, name, owner_agent_id, created_at)
SELECT $1, seed_id($1, 'room', g), 'room-' || g, seed_id($1, 'agent', 1), '2026-01-01' FROM generate_series(1, $3) g;
INSERT INTO room_members (box_id, room_id, agent_id, state, epoch, joined_at)
SELECT $1, seed_id($1, 'room', r), seed_id($1, 'agent', a), 'active', 1, '2026-01-01'
FROM generate_series(1, $3) r, generate_series(1, least($2, 50)) a;
-- Agent 2 writes; agent 1 reads: every message is in room 1 or in the DM of agents 1 and 2.
INSERT INTO messages (box_id, message_id, message_seq, channel_id, sender_agent_id, dest_kind, dest_room_id, dest_agent_id,
                      body_md, thread_root_id, content_hash, created_at)
SELECT $1, seed_id($1, 'message', g), nextval(box_message_seq($1)),
       CASE WHEN g % 2 = 0 THEN seed_id($1, 'room', 1) ELSE seed_id($1, 'dm', 2) END, seed_id($1, 'agent', 2),
       CASE WHEN g % 2 = 0 THEN 'room' ELSE 'dm' END,
       CASE WHEN g % 2 = 0 THEN seed_id($1, 'room', 1) END, CASE WHEN g % 2 = 1 THEN seed_id($1, 'agent', 1) END,
       'history ' || g, seed_id($1, 'message', g - g % 10 + 1), sha256(convert_to($1::uuid::text || g, 'UTF8')),
       '2026-01-01'::timestamptz + g * interval '1 ms'
FROM generate_series(1, $4) g;
INSERT INTO attention (box_id, agent_id, inbox_seq, message_id, channel_id, reasons, acked_at, acked_by_session_id)
SELECT $1, seed_id($1, 'agent', 1), nextval(box_inbox_seq($1)), message_id, channel_id, CASE WHEN dest_kind = 'dm' THEN 1 ELSE 2 END,
       CASE WHEN message_seq % 10 <> 0 THEN created_at END, CASE WHEN message_seq % 10 <> 0 THEN seed_id($1, 'session', 1) END
FROM messages WHERE box_id = $1 ORDER BY message_seq;
UPDATE attention SET lease_session_id = seed_id($1, 'session', 1), lease_expires_at = '2030-01-01'
WHERE box_id = $1 AND acked_at IS NULL AND inbox_seq % 3 = 0;
INSERT INTO receipts (box_id, agent_id, inbox_seq, session_id) SELECT box_id, agent_id, inbox_seq, seed_id($1, 'session', 1) FROM attention WHERE box_id = $1;
INSERT INTO requests (box_id, message_id, recipient_agent_id, message_seq, requester_agent_id, updated_at)
SELECT box_id, message_id, seed_id($1, 'agent', 1), message_seq, sender_agent_id, created_at FROM messages WHERE box_id = $1 AND message_seq % 7 = 0;
INSERT INTO channel_sender_latest (box_id, channel_id, sender_agent_id, message_id, content_hash)
SELECT DISTINCT ON (channel_id) box_id, channel_id, sender_agent_id, message_id, content_hash
FROM messages WHERE box_id = $1 ORDER BY channel_id, message_seq DESC;
INSERT INTO channel_sender_latest (box_id, channel_id, sender_agent_id, message_id, content_hash)
SELECT $1, c.channel_id, seed_id($1, 'agent', g), seed_id($1, 'message', 1), '\x00'
FROM channels c, generate_series(3, 6) g WHERE c.box_id = $1;
INSERT INTO file_reports (box_id, message_id, file_index, reporter_agent_id, status, updated_at)
SELECT $1, message_id, 0, seed_id($1, 'agent', 1), 'accessible', created_at FROM messages WHERE box_id = $1 AND message_seq % 20 = 0;
INSERT INTO attachments (box_id, message_id, attachment_id, name, media_type, size_bytes, sha256)
SELECT box_id, message_id, gen_random_uuid(), 'a.txt', 'text/plain', 1, '' FROM messages WHERE box_id = $1 AND message_seq % 5 = 0;
UPDATE messages SET has_attachment = true WHERE box_id = $1 AND message_seq % 5 = 0;
INSERT INTO idempotency_records (box_id, agent_id, tool, idem_key, request_hash, response, created_at, expires_at)
SELECT $1, seed_id($1, 'agent', 1 + g % $2), 'message_send', 'key-' || g, '\x00', '\x00', '2026-01-01', '2026-01-02'
FROM generate_series(1, $4) g;
UPDATE channels c SET last_message_seq = x.top, message_count = x.n
FROM (SELECT channel_id, max(message_seq) AS top, count(*) AS n FROM messages WHERE box_id = $1 GROUP BY channel_id) x
WHERE c.box_id = $1 AND c.channel_id = x.channel_id;
SELECT inbox_recount($1);
-- Every room member has rows in its rooms, all read (only agent 1's are seeded): their counters.
INSERT INTO inbox_delivered (box_id, agent_id, channel_id, n)
SELECT box_id, agent_id, room_id, 2 FROM room_members WHERE box_id = $1 ON CONFLICT DO NOTHING;
INSERT INTO inbox_acked (box_id, agent_id, channel_id, shard, n)
SELECT box_id, agent_id, room_id, 0, 2 FROM room_members WHERE box_id = $1 ON CONFLICT DO NOTHING;`

func seedBox(t *testing.T, conn *pgx.Conn, box uuid.UUID, agents, rooms, messages int) {
	t.Helper()
	ctx := context.Background()
	for i, stmt := range strings.Split(seedBoxSQL, ";\n") {
		if strings.TrimSpace(stmt) == "" {
			continue
		}
		// The values are this test's own UUID and counts: inlined as literals, since each
		// statement uses a different subset of them.
		lit := strings.NewReplacer("$1", "'"+box.String()+"'::uuid", "$2", fmt.Sprint(agents), "$3", fmt.Sprint(rooms),
			"$4", fmt.Sprint(messages)).Replace(stmt)
		if _, err := conn.Exec(ctx, lit); err != nil {
			t.Fatalf("seed statement %d: %v", i, err)
		}
	}
}

// boxTables are the tables whose rows belong to boxes.
var boxTables = map[string]bool{
	"boxes": true, "hosts": true, "agents": true, "api_keys": true, "sessions": true, "checkpoints": true,
	"idempotency_records": true, "channels": true, "rooms": true, "room_members": true, "messages": true,
	"channel_sender_latest": true, "attachments": true, "attention": true, "receipts": true, "requests": true,
	"file_reports": true, "cleanup_status": true, "inbox_delivered": true, "inbox_acked": true,
}

// historyTables grow with a box's history.
var historyTables = map[string]bool{
	"messages": true, "attention": true, "receipts": true, "requests": true, "file_reports": true,
	"attachments": true, "idempotency_records": true, "channel_sender_latest": true,
}

// populationTables hold a box's members (agents, their keys and sessions, rooms and
// memberships, DM pairs): they do not grow with history, but a box can hold thousands of
// each, so a hot statement must not walk them by the box alone either. (Hosts are the box's
// machines: a handful.)
var populationTables = map[string]bool{
	"agents": true, "api_keys": true, "sessions": true, "rooms": true, "room_members": true, "channels": true,
}

// ownerColumns bound a scan to an owner (box, agent, channel, sender, session), not to rows.
var ownerColumns = map[string]bool{
	"box_id": true, "agent_id": true, "channel_id": true, "sender_agent_id": true, "recipient_agent_id": true,
	"requester_agent_id": true, "session_id": true, "lease_session_id": true,
}

// workIndexes hold an agent's open work (unread rows, live leases, pending requests), not its
// history: a scan bounded by the owner on them costs O(open work).
var workIndexes = map[string]bool{
	"attention_leased_unread": true, "attention_unread_by_channel": true, "attention_claimable": true,
	"attention_lease_expiry": true, "requests_pending": true,
}

// filters reports whether a scan's filter can reject rows beyond its index's partial
// predicate and per-row subplans (a Limit then no longer bounds the rows the scan reads).
func filters(f string) bool {
	f = predicateTerms.ReplaceAllString(f, "")
	return strings.Trim(f, "() ANDOR") != ""
}

// The accessibility check of a row is a DM-row test or a per-row subplan (queries/inbox.sql).
var predicateTerms = regexp.MustCompile(`acked_at IS NULL|lease_session_id IS (NOT )?NULL|has_attachment|\(reasons & 1\) <> 0|\bOR\b|SubPlan \d+|\(|\)|AND|\s`)

var condColumn = regexp.MustCompile(`\(?([a-z_]+) (=|>=|<=|>|<) `)

type planNode struct {
	NodeType  string     `json:"Node Type"`
	Relation  string     `json:"Relation Name"`
	IndexName string     `json:"Index Name"`
	IndexCond string     `json:"Index Cond"`
	Filter    string     `json:"Filter"`
	Loops     float64    `json:"Actual Loops"` // EXPLAIN ANALYZE only
	Plans     []planNode `json:"Plans"`
}

// planProblems lists the scans of a plan that break the rule above.
// limited: n is the ordered scan a Limit stops (through row locks or a subquery), so it
// reads O(limit) rows however long the owner's history.
func planProblems(n planNode, indexCols map[string][]string, unique map[string]bool, limited bool, out *[]string) {
	switch n.NodeType {
	case "Seq Scan", "Sample Scan", "Tid Range Scan":
		if boxTables[n.Relation] {
			*out = append(*out, fmt.Sprintf("%s on %s", n.NodeType, n.Relation))
		}
	case "Index Scan", "Index Only Scan", "Bitmap Index Scan":
		rel := scanRelation(n)
		if !historyTables[rel] && !populationTables[rel] || workIndexes[n.IndexName] && !limited || limited && n.NodeType != "Bitmap Index Scan" && !filters(n.Filter) {
			break
		}
		if !keyedScan(n, rel, indexCols, unique) {
			*out = append(*out, fmt.Sprintf("%s using %s bounded only by its owner (%s)", n.NodeType, n.IndexName, n.IndexCond))
		}
	}
	for _, c := range n.Plans {
		switch {
		case n.NodeType == "Limit" && len(n.Plans) == 1:
			planProblems(c, indexCols, unique, true, out)
		case limited && (n.NodeType == "LockRows" || n.NodeType == "Subquery Scan") && len(n.Plans) == 1:
			planProblems(c, indexCols, unique, true, out)
		default:
			planProblems(c, indexCols, unique, false, out)
		}
	}
}

// keyedScan reports whether an index scan of rel is bounded by its rows' keys rather than
// only by an owner (a box, agent, channel…) or a one-sided range.
func keyedScan(n planNode, rel string, indexCols map[string][]string, unique map[string]bool) bool {
	// A column bounds the scan with an equality (or = ANY) or with a range closed on
	// both sides; a one-sided range (message_seq > floor) walks the rest of the history.
	eq, lo, hi := map[string]bool{}, map[string]bool{}, map[string]bool{}
	for _, m := range condColumn.FindAllStringSubmatch(n.IndexCond, -1) {
		switch m[2] {
		case "=":
			eq[m[1]] = true
		case ">", ">=":
			lo[m[1]] = true
		default:
			hi[m[1]] = true
		}
	}
	// Only a leading run of bound index columns bounds the scan (a condition on a
	// column after an unbound one is checked on every entry of the prefix).
	cols := indexCols[n.IndexName]
	keyed, prefix := false, 0
	for _, c := range cols {
		if lo[c] && hi[c] && !eq[c] {
			keyed = true
			break
		}
		if !eq[c] {
			break
		}
		prefix++
		// A channel's duplicate references are one per sender, not its history.
		if !ownerColumns[c] || rel == "channel_sender_latest" && c == "channel_id" {
			keyed = true
		}
	}
	if unique[n.IndexName] && prefix == len(cols) && len(cols) > 0 {
		keyed = true
	}
	return keyed
}

// scanRelation is the table an index scan reads (a bitmap index scan names only its index).
func scanRelation(n planNode) string {
	if n.Relation != "" {
		return n.Relation
	}
	rel := strings.SplitN(n.IndexName, "_", 2)[0]
	for t := range boxTables {
		if strings.HasPrefix(n.IndexName, t) && len(t) > len(rel) {
			rel = t
		}
	}
	return rel
}

// repeatedOwnerScans lists the scans of an analyzed plan that read an owner's range (a box
// table scanned whole, or by an index only owner columns bound) more than once: the inner
// side of a nested loop that reads the range again for every row of its outer side.
func repeatedOwnerScans(n planNode, indexCols map[string][]string, unique map[string]bool, out *[]string) {
	switch n.NodeType {
	case "Seq Scan":
		if boxTables[n.Relation] && n.Loops > 1 {
			*out = append(*out, fmt.Sprintf("Seq Scan on %s ran %v times", n.Relation, n.Loops))
		}
	case "Index Scan", "Index Only Scan", "Bitmap Index Scan":
		if rel := scanRelation(n); boxTables[rel] && n.Loops > 1 && !keyedScan(n, rel, indexCols, unique) {
			*out = append(*out, fmt.Sprintf("%s using %s (%s) ran %v times", n.NodeType, n.IndexName, n.IndexCond, n.Loops))
		}
	}
	for _, c := range n.Plans {
		repeatedOwnerScans(c, indexCols, unique, out)
	}
}

func TestPlansForNewBox(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	nested := &nestedPlans{}
	conn := noticeConn(t, nested)
	if _, err := conn.Exec(ctx, `CREATE FUNCTION seed_id(box uuid, kind text, n int) RETURNS uuid LANGUAGE sql IMMUTABLE
		AS $$ SELECT md5(box::text || kind || n)::uuid $$`); err != nil {
		t.Fatal(err)
	}
	oldBox, newBox := uuid.New(), uuid.New()
	seedBox(t, conn, oldBox, 3000, 2000, 40_000)
	// Other boxes exist too (a lookup by box must not scan the boxes table).
	if _, err := conn.Exec(ctx, `INSERT INTO boxes (box_id, box_key, created_at)
		SELECT gen_random_uuid(), 'filler-' || g, '2026-01-01' FROM generate_series(1, 2000) g`); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "ANALYZE"); err != nil {
		t.Fatal(err)
	}
	seedBox(t, conn, newBox, 3, 1, 40)

	newWorld, oldWorld := hotWorldOf(t, conn, newBox, 10), hotWorldOf(t, conn, oldBox, 19_999)
	hot := hotStatements(ctx, newWorld)

	indexCols, unique := map[string][]string{}, map[string]bool{}
	rows, err := conn.Query(ctx, `SELECT i.relname, x.indisunique, array_agg(a.attname::text ORDER BY k.n)
		FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid
		CROSS JOIN LATERAL unnest(x.indkey) WITH ORDINALITY AS k(attnum, n)
		JOIN pg_attribute a ON a.attrelid = x.indrelid AND a.attnum = k.attnum
		WHERE i.relnamespace = 'public'::regnamespace GROUP BY i.relname, x.indisunique`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var name string
		var isUnique bool
		var cols []string
		if err := rows.Scan(&name, &isUnique, &cols); err != nil {
			t.Fatal(err)
		}
		indexCols[name], unique[name] = cols, isUnique
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}

	// The statements the hot ones run inside functions (the expired-lease lookups, the inbox
	// bound) and their foreign keys' checks and cascades are checked by the same rule, as
	// PostgreSQL planned them (auto_explain). The cascade of EnforceRetention into an
	// empty file_reports table was planned as a sequential scan, which is why the old box
	// holds file reports: an empty table's plan is no box's plan.
	enableAutoExplain(t, conn)
	for name, call := range hot {
		rec := &recorder{}
		call(db.New(rec)) //nolint:errcheck // always errQueued: the statement is only recorded
		if rec.sql == "" {
			t.Fatalf("%s ran no query", name)
		}
		for _, mode := range []string{"custom", "generic"} {
			plan, err := explain(ctx, conn, rec.sql, rec.args, mode == "generic")
			if err != nil {
				t.Errorf("%s (%s plan): explain: %v", name, mode, err)
				continue
			}
			var problems []string
			planProblems(plan, indexCols, unique, false, &problems)
			if len(problems) > 0 && os.Getenv("PLANS_DEBUG") != "" {
				raw, _ := json.MarshalIndent(plan, "", " ")
				t.Logf("%s %s:\n%s\n%s", name, mode, rec.sql, raw)
			}
			for _, p := range problems {
				t.Errorf("%s (%s plan for a new box): %s", name, mode, p)
			}
		}
		// A prepared statement keeps its generic plan (the one checked above) only while that
		// plan is estimated no dearer than a custom one plus the planning it saves; otherwise
		// PostgreSQL plans it again at every execution. SenderLatest was (0.75 ms of planning
		// per send): see "array parameters" in queries/messages.sql.
		nested.reset()
		if custom, generic, err := planChoices(ctx, conn, rec.sql, rec.args, 10); err != nil {
			t.Errorf("%s: prepared executions: %v", name, err)
		} else if generic == 0 {
			t.Errorf("%s: %d custom plans and no generic plan in 10 executions: PostgreSQL re-plans it at every call", name, custom)
		}
		seen := map[string]bool{}
		for _, p := range nested.get() {
			if p.QueryText == rec.sql || strings.Contains(p.QueryText, "pg_prepared_statements") {
				continue // the statement itself, and planChoices' own query
			}
			var problems []string
			planProblems(p.Plan, indexCols, unique, false, &problems)
			for _, pr := range problems {
				if msg := fmt.Sprintf("%s: a statement it runs in a function (%s): %s", name, oneLineSQL(p.QueryText), pr); !seen[msg] {
					seen[msg] = true
					t.Error(msg)
				}
			}
		}
	}

	// The same statements run (EXPLAIN ANALYZE, generic plans, writes rolled back) for the
	// old box's reader: an agent in 2,000 rooms with 40,000 inbox rows, a third of its unread
	// ones leased. No scan that only an owner bounds may run more than once, in the statement
	// or in what it runs inside functions: a nested loop that repeats one reads an owner's
	// range again for every row of its outer side. InboxCounts' join of its two counter
	// ranges did (870 ms for this agent, queries/inbox.sql), and the estimates of a new box,
	// a row or two per owner, cannot show it.
	if _, err := conn.Exec(ctx, "SET auto_explain.log_analyze = on"); err != nil {
		t.Fatal(err)
	}
	var repeated int // scans that ran more than once, keyed or not
	var countRepeated func(n planNode)
	countRepeated = func(n planNode) {
		if n.Loops > 1 {
			repeated++
		}
		for _, c := range n.Plans {
			countRepeated(c)
		}
	}
	for name, call := range hotStatements(ctx, oldWorld) {
		rec := &recorder{}
		call(db.New(rec)) //nolint:errcheck // always errQueued: the statement is only recorded
		nested.reset()
		if err := runGeneric(ctx, conn, rec.sql, rec.args); err != nil {
			t.Errorf("%s (generic plan, old box): %v", name, err)
			continue
		}
		var problems []string
		var ran bool
		for _, p := range nested.get() {
			ran = ran || p.QueryText == rec.sql
			repeatedOwnerScans(p.Plan, indexCols, unique, &problems)
			countRepeated(p.Plan)
			if len(problems) > 0 && os.Getenv("PLANS_DEBUG") != "" {
				raw, _ := json.MarshalIndent(p.Plan, "", " ")
				t.Logf("%s old box, %s:\n%s", name, oneLineSQL(p.QueryText), raw)
			}
		}
		if !ran {
			t.Errorf("%s: auto_explain reported no plan of the statement on the old box", name)
		}
		for _, p := range problems {
			t.Errorf("%s (generic plan, the old box's reader): %s", name, p)
		}
	}
	if repeated == 0 {
		t.Error("no node of the old box's plans ran more than once: auto_explain no longer reports actual loops, and the check above sees nothing")
	}
}

// testConn connects to a fresh test database as the store's pool would (UUID codec and the
// session settings of prepareConn); closed when the test ends.
func testConn(t *testing.T) *pgx.Conn { return noticeConn(t, nil) }

// noticeConn is testConn with the connection's notices (auto_explain's plans, once
// enableAutoExplain has run) collected into into, when it is not nil.
func noticeConn(t *testing.T, into *nestedPlans) *pgx.Conn {
	t.Helper()
	ctx := context.Background()
	cfg, err := pgx.ParseConfig(testdb.New(t))
	if err != nil {
		t.Fatal(err)
	}
	if into != nil {
		cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) { into.add(n.Message) }
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(ctx) }) //nolint:errcheck
	registerUUID(conn.TypeMap())
	if err := prepareConn(ctx, conn); err != nil {
		t.Fatal(err)
	}
	return conn
}

// explain returns the plan PostgreSQL chooses for sql with args: planned for the arguments,
// or (generic) as the cached generic plan of a prepared statement.
func explain(ctx context.Context, conn *pgx.Conn, sql string, args []any, generic bool) (planNode, error) {
	var out []struct {
		Plan planNode `json:"Plan"`
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		return planNode{}, err
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	var raw []byte
	if generic {
		if _, err := tx.Exec(ctx, "SET LOCAL plan_cache_mode = force_generic_plan"); err != nil {
			return planNode{}, err
		}
		// A generic plan does not depend on the values: the statement is prepared with its
		// parameter types and explained with NULLs.
		sd, err := tx.Conn().Prepare(ctx, "plan_guard_describe", sql)
		if err != nil {
			return planNode{}, err
		}
		defer tx.Conn().Deallocate(ctx, "plan_guard_describe") //nolint:errcheck
		types, nulls := make([]string, len(sd.ParamOIDs)), make([]string, len(sd.ParamOIDs))
		for i, oid := range sd.ParamOIDs {
			if err := tx.QueryRow(ctx, "SELECT $1::oid::regtype::text", oid).Scan(&types[i]); err != nil {
				return planNode{}, err
			}
			nulls[i] = "NULL"
		}
		prep, exec := "PREPARE plan_guard", "EXPLAIN (FORMAT JSON) EXECUTE plan_guard"
		if len(types) > 0 {
			prep += "(" + strings.Join(types, ", ") + ")"
			exec += "(" + strings.Join(nulls, ", ") + ")"
		}
		if _, err := tx.Exec(ctx, prep+" AS "+sql); err != nil {
			return planNode{}, err
		}
		defer tx.Exec(ctx, "DEALLOCATE plan_guard") //nolint:errcheck
		if err := tx.QueryRow(ctx, exec).Scan(&raw); err != nil {
			return planNode{}, err
		}
	} else if err := tx.QueryRow(ctx, "EXPLAIN (FORMAT JSON) "+sql, args...).Scan(&raw); err != nil {
		return planNode{}, err
	}
	if err := json.Unmarshal(raw, &out); err != nil || len(out) != 1 {
		return planNode{}, fmt.Errorf("plan: %v", err)
	}
	return out[0].Plan, nil
}

// planChoices prepares sql, executes it n times with args (each in a savepoint rolled back,
// so writes and their errors leave nothing) and returns how many custom and generic plans
// PostgreSQL used (pg_prepared_statements).
func planChoices(ctx context.Context, conn *pgx.Conn, sql string, args []any, n int) (custom, generic int64, err error) {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return 0, 0, err
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	if _, err := tx.Conn().Prepare(ctx, "plan_choice", sql); err != nil {
		return 0, 0, err
	}
	defer conn.Deallocate(ctx, "plan_choice") //nolint:errcheck
	for range n {
		if _, err := tx.Exec(ctx, "SAVEPOINT plan_choice"); err != nil {
			return 0, 0, err
		}
		rows, err := tx.Query(ctx, "plan_choice", args...)
		if err == nil {
			rows.Close()
		}
		if _, err := tx.Exec(ctx, "ROLLBACK TO SAVEPOINT plan_choice"); err != nil {
			return 0, 0, err
		}
	}
	err = tx.QueryRow(ctx, "SELECT custom_plans, generic_plans FROM pg_prepared_statements WHERE name = 'plan_choice'").Scan(&custom, &generic)
	return custom, generic, err
}

// oneLineSQL shortens a statement for a test message.
func oneLineSQL(q string) string {
	q = strings.Join(strings.Fields(q), " ")
	if len(q) > 120 {
		q = q[:120] + "…"
	}
	return q
}

// InboxCounts reads the agent's two counter ranges (inbox_delivered, inbox_acked) once each,
// in its custom and in its generic plan, for an agent with a counter row in each of hundreds
// of channels: a join of the two ranges, planned for a row or two each, was a nested loop
// that read the whole acked range again for every delivered row (quadratic in the agent's
// channels; queries/inbox.sql).
func TestInboxCountsReadsEachCounterRangeOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	conn := testConn(t)
	if _, err := conn.Exec(ctx, `CREATE FUNCTION seed_id(box uuid, kind text, n int) RETURNS uuid LANGUAGE sql IMMUTABLE
		AS $$ SELECT md5(box::text || kind || n)::uuid $$`); err != nil {
		t.Fatal(err)
	}
	box := uuid.New()
	seedBox(t, conn, box, 60, 400, 2000) // agent 1 is a member of all 400 rooms
	if _, err := conn.Exec(ctx, "ANALYZE"); err != nil {
		t.Fatal(err)
	}
	var agent, session uuid.UUID
	if err := conn.QueryRow(ctx, "SELECT seed_id($1, 'agent', 1), seed_id($1, 'session', 1)", box).Scan(&agent, &session); err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	db.New(rec).InboxCounts(ctx, db.InboxCountsParams{BoxID: box, AgentID: agent, SessionID: session, Now: time.Now()}) //nolint:errcheck // only recorded
	for _, generic := range []bool{false, true} {
		plan, err := explainAnalyze(ctx, conn, rec.sql, rec.args, generic)
		if err != nil {
			t.Fatal(err)
		}
		var scans int
		var walk func(n planNode)
		walk = func(n planNode) {
			if n.Relation == "inbox_delivered" || n.Relation == "inbox_acked" || strings.HasPrefix(n.IndexName, "inbox_delivered") || strings.HasPrefix(n.IndexName, "inbox_acked") {
				scans++
				if n.Loops > 1 {
					t.Errorf("generic %v: %s %s%s ran %v times", generic, n.NodeType, n.Relation, n.IndexName, n.Loops)
				}
			}
			for _, c := range n.Plans {
				walk(c)
			}
		}
		walk(plan)
		if scans == 0 {
			t.Errorf("generic %v: no scan of the counters in the plan", generic)
		}
	}
}

// runGeneric runs sql with args under its generic plan, as a prepared statement, in a
// transaction it rolls back (auto_explain, when enabled, reports the plans).
func runGeneric(ctx context.Context, conn *pgx.Conn, sql string, args []any) error {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	if _, err := tx.Exec(ctx, "SET LOCAL plan_cache_mode = force_generic_plan"); err != nil {
		return err
	}
	rows, err := tx.Query(ctx, sql, args...)
	if err != nil {
		return err
	}
	rows.Close()
	return rows.Err()
}

// explainAnalyze runs sql with args under EXPLAIN ANALYZE in a transaction it rolls back:
// planned for the arguments, or (generic) as the generic plan of a prepared statement, whose
// parameters EXECUTE passes as literals.
func explainAnalyze(ctx context.Context, conn *pgx.Conn, sql string, args []any, generic bool) (planNode, error) {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return planNode{}, err
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	var raw []byte
	if generic {
		lits := make([]string, len(args))
		for i, a := range args {
			switch v := a.(type) {
			case time.Time:
				lits[i] = "'" + v.Format(time.RFC3339Nano) + "'"
			case uuid.UUID:
				lits[i] = "'" + v.String() + "'"
			case int32, int64, int:
				lits[i] = fmt.Sprint(v)
			default:
				return planNode{}, fmt.Errorf("explainAnalyze: no literal for %T", a)
			}
		}
		if _, err := tx.Exec(ctx, "SET LOCAL plan_cache_mode = force_generic_plan"); err != nil {
			return planNode{}, err
		}
		if _, err := tx.Exec(ctx, "PREPARE plan_analyze AS "+sql); err != nil {
			return planNode{}, err
		}
		defer tx.Exec(ctx, "DEALLOCATE plan_analyze") //nolint:errcheck
		if err := tx.QueryRow(ctx, "EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE plan_analyze("+strings.Join(lits, ", ")+")").Scan(&raw); err != nil {
			return planNode{}, err
		}
	} else if err := tx.QueryRow(ctx, "EXPLAIN (ANALYZE, FORMAT JSON) "+sql, args...).Scan(&raw); err != nil {
		return planNode{}, err
	}
	var out []struct {
		Plan planNode `json:"Plan"`
	}
	if err := json.Unmarshal(raw, &out); err != nil || len(out) != 1 {
		return planNode{}, fmt.Errorf("plan: %v", err)
	}
	return out[0].Plan, nil
}

// hotWorld is what the hot statements are called with: a box's reader (agent 1) and sender
// (agent 2), the reader's session, room 1, the DM of agents 1 and 2, the reader's 20 latest
// inbox rows and three of the box's messages.
type hotWorld struct {
	box, reader, sender, session, room, dm, lo, hi uuid.UUID
	seqs                                           []int64
	msgs                                           []uuid.UUID
	// retentionCap is a cap EnforceRetention applies to room 1 (a little under its count:
	// one message to delete).
	retentionCap int64
}

// hotWorldOf reads a seeded box's hotWorld.
func hotWorldOf(t *testing.T, conn *pgx.Conn, box uuid.UUID, retentionCap int64) hotWorld {
	t.Helper()
	ctx := context.Background()
	id := func(kind string, n int) uuid.UUID {
		var v uuid.UUID
		if err := conn.QueryRow(ctx, "SELECT seed_id($1, $2, $3)", box, kind, n).Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	w := hotWorld{box: box, reader: id("agent", 1), sender: id("agent", 2), session: id("session", 1), room: id("room", 1), dm: id("dm", 2),
		msgs: []uuid.UUID{id("message", 2), id("message", 4), id("message", 6)}, retentionCap: retentionCap}
	w.lo, w.hi = DMPair(w.reader, w.sender)
	if err := conn.QueryRow(ctx, `SELECT array_agg(inbox_seq) FROM (SELECT inbox_seq FROM attention WHERE box_id = $1 ORDER BY inbox_seq DESC LIMIT 20) s`,
		box).Scan(&w.seqs); err != nil {
		t.Fatal(err)
	}
	return w
}

// hotStatements are the statements of send, inbox_list, inbox_claim, inbox_ack and
// conversation_read, and the idempotency sweeper's batch, each called for w.
func hotStatements(ctx context.Context, w hotWorld) map[string]func(q *db.Queries) error {
	box, reader, sender, session, room, dm, lo, hi, seqs, msgs := w.box, w.reader, w.sender, w.session, w.room, w.dm, w.lo, w.hi, w.seqs, w.msgs
	now := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	newIDs := []uuid.UUID{uuid.New()}
	nilID := uuid.UUID{}
	hash := make([]byte, 32)
	return map[string]func(q *db.Queries) error{
		// send: authentication, session and idempotency, channel locks and checks, the writes.
		"AuthenticateKey": func(q *db.Queries) error {
			_, err := q.AuthenticateKey(ctx, db.AuthenticateKeyParams{KeyHash: hash, BoxKey: box.String()})
			return err
		},
		"GetSession": func(q *db.Queries) error {
			_, err := q.GetSession(ctx, db.GetSessionParams{BoxID: box, AgentID: sender, SessionKeyHash: hash, Now: now, StaleBefore: now})
			return err
		},
		"GetIdempotencyRecord": func(q *db.Queries) error {
			_, err := q.GetIdempotencyRecord(ctx, db.GetIdempotencyRecordParams{BoxID: box, AgentID: sender, Tool: "message_send", IdemKey: "k", Now: now})
			return err
		},
		"PutIdempotencyRecord": func(q *db.Queries) error {
			return q.PutIdempotencyRecord(ctx, db.PutIdempotencyRecordParams{BoxID: box, AgentID: sender, Tool: "message_send", IdemKey: "k",
				RequestHash: hash, Response: []byte("{}"), Now: now, ExpiresAt: now})
		},
		"LockChannel": func(q *db.Queries) error {
			_, err := q.LockChannel(ctx, db.LockChannelParams{BoxID: box, ChannelID: room})
			return err
		},
		"GetRoomForAgent": func(q *db.Queries) error {
			_, err := q.GetRoomForAgent(ctx, db.GetRoomForAgentParams{BoxID: box, RoomID: room, AgentID: sender})
			return err
		},
		"SenderLatest": func(q *db.Queries) error {
			_, err := q.SenderLatest(ctx, db.SenderLatestParams{BoxID: box, SenderAgentID: sender, ChannelIds: []uuid.UUID{room}})
			return err
		},
		"RoomMemberStates": func(q *db.Queries) error {
			_, err := q.RoomMemberStates(ctx, db.RoomMemberStatesParams{BoxID: box, RoomID: room, AgentIds: []uuid.UUID{reader}})
			return err
		},
		"AgentEnabled": func(q *db.Queries) error {
			_, err := q.AgentEnabled(ctx, db.AgentEnabledParams{BoxID: box, AgentID: reader})
			return err
		},
		"LockDMChannels": func(q *db.Queries) error {
			_, err := q.LockDMChannels(ctx, db.LockDMChannelsParams{BoxID: box, Los: []uuid.UUID{lo}, His: []uuid.UUID{hi}})
			return err
		},
		"DMSenderLatest": func(q *db.Queries) error {
			_, err := q.DMSenderLatest(ctx, db.DMSenderLatestParams{BoxID: box, SenderAgentID: sender, Lo: &lo, Hi: &hi})
			return err
		},
		"InsertMessages": func(q *db.Queries) error {
			_, err := q.InsertMessages(ctx, db.InsertMessagesParams{MessageIds: newIDs, ChannelIds: []uuid.UUID{room}, DestAgentIds: []uuid.UUID{nilID},
				DestRoomIds: []uuid.UUID{room}, BoxID: box, SenderAgentID: sender, DestKind: "room", BodyMd: "hi",
				MentionAgentIds: []uuid.UUID{}, RequestAgentIds: []uuid.UUID{}, Files: []byte("[]"), ContentHash: hash, Now: now})
			return err
		},
		"InsertAttention": func(q *db.Queries) error {
			_, err := q.InsertAttention(ctx, db.InsertAttentionParams{BoxID: box, DmMessageIds: []uuid.UUID{}, DmChannelIds: []uuid.UUID{},
				DmRecipientIds: []uuid.UUID{}, RoomMessageID: newIDs[0], RoomID: room, SenderAgentID: sender,
				MentionAgentIds: []uuid.UUID{}, RequestAgentIds: []uuid.UUID{}})
			return err
		},
		"EnforceRetention": func(q *db.Queries) error {
			_, err := q.EnforceRetention(ctx, db.EnforceRetentionParams{BoxID: box, ChannelIds: []uuid.UUID{room}, MessageCap: w.retentionCap, AttachmentCap: w.retentionCap})
			return err
		},
		// inbox_list
		"InboxUpper": func(q *db.Queries) error {
			_, err := q.InboxUpper(ctx, db.InboxUpperParams{BoxID: box, AgentID: reader})
			return err
		},
		"InboxUnreadSeqs": func(q *db.Queries) error {
			_, err := q.InboxUnreadSeqs(ctx, db.InboxUnreadSeqsParams{BoxID: box, AgentID: reader, After: 0, Upper: 1 << 40, MaxRows: 51})
			return err
		},
		"InboxSeqs": func(q *db.Queries) error {
			_, err := q.InboxSeqs(ctx, db.InboxSeqsParams{BoxID: box, AgentID: reader, AckedOnly: true, After: 0, Upper: 1 << 40, MaxRows: 51})
			return err
		},
		"InboxChannelUnreadSeqs": func(q *db.Queries) error {
			_, err := q.InboxChannelUnreadSeqs(ctx, db.InboxChannelUnreadSeqsParams{BoxID: box, AgentID: reader, ChannelID: room, After: 0, Upper: 1 << 40, MaxRows: 51})
			return err
		},
		"InboxChannelSeqs": func(q *db.Queries) error {
			_, err := q.InboxChannelSeqs(ctx, db.InboxChannelSeqsParams{BoxID: box, AgentID: reader, ChannelID: room, After: 0, Upper: 1 << 40, MaxRows: 51})
			return err
		},
		"InboxChannelAckedSeqs": func(q *db.Queries) error {
			_, err := q.InboxChannelAckedSeqs(ctx, db.InboxChannelAckedSeqsParams{BoxID: box, AgentID: reader, ChannelID: room, After: 0, Upper: 1 << 40, MaxRows: 51})
			return err
		},
		"InboxRows": func(q *db.Queries) error {
			_, err := q.InboxRows(ctx, db.InboxRowsParams{BoxID: box, AgentID: reader, InboxSeqs: seqs})
			return err
		},
		"RecordInboxReceipts": func(q *db.Queries) error {
			return q.RecordInboxReceipts(ctx, db.RecordInboxReceiptsParams{BoxID: box, AgentID: reader, SessionID: session, InboxSeqs: seqs})
		},
		"InboxCounts": func(q *db.Queries) error {
			_, err := q.InboxCounts(ctx, db.InboxCountsParams{BoxID: box, AgentID: reader, SessionID: session, Now: now})
			return err
		},
		// inbox_claim
		"LockClaimCandidatesOldest": func(q *db.Queries) error {
			_, err := q.LockClaimCandidatesOldest(ctx, db.LockClaimCandidatesOldestParams{BoxID: box, AgentID: reader, Now: now, MaxRows: 20})
			return err
		},
		"LockClaimCandidatesNewest": func(q *db.Queries) error {
			_, err := q.LockClaimCandidatesNewest(ctx, db.LockClaimCandidatesNewestParams{BoxID: box, AgentID: reader, Now: now, MaxRows: 20})
			return err
		},
		"ClaimAccessibleOldest": func(q *db.Queries) error {
			_, err := q.ClaimAccessibleOldest(ctx, db.ClaimAccessibleOldestParams{BoxID: box, AgentID: reader, Now: now, MaxRows: 20})
			return err
		},
		"ClaimAccessibleNewest": func(q *db.Queries) error {
			_, err := q.ClaimAccessibleNewest(ctx, db.ClaimAccessibleNewestParams{BoxID: box, AgentID: reader, Now: now, MaxRows: 20})
			return err
		},
		"LeaseRows": func(q *db.Queries) error {
			return q.LeaseRows(ctx, db.LeaseRowsParams{BoxID: box, AgentID: reader, SessionID: session, InboxSeqs: seqs, ExpiresAt: now})
		},
		// inbox_ack
		"LockAckRows": func(q *db.Queries) error {
			_, err := q.LockAckRows(ctx, db.LockAckRowsParams{BoxID: box, AgentID: reader, InboxSeqs: seqs})
			return err
		},
		"AckRowStates": func(q *db.Queries) error {
			_, err := q.AckRowStates(ctx, db.AckRowStatesParams{BoxID: box, AgentID: reader, SessionID: session, InboxSeqs: seqs})
			return err
		},
		"AckRows": func(q *db.Queries) error {
			return q.AckRows(ctx, db.AckRowsParams{BoxID: box, AgentID: reader, SessionID: session, InboxSeqs: seqs, Now: now})
		},
		// conversation_read
		"ChannelHead": func(q *db.Queries) error {
			_, err := q.ChannelHead(ctx, db.ChannelHeadParams{BoxID: box, ChannelID: room})
			return err
		},
		"DMChannelHead": func(q *db.Queries) error {
			_, err := q.DMChannelHead(ctx, db.DMChannelHeadParams{BoxID: box, Lo: &lo, Hi: &hi})
			return err
		},
		"ChannelMessages": func(q *db.Queries) error {
			_, err := q.ChannelMessages(ctx, db.ChannelMessagesParams{BoxID: box, ChannelID: dm, After: 0, Upper: 1 << 40, MaxRows: 51})
			return err
		},
		"VisibleChannelMessageIDs": func(q *db.Queries) error {
			_, err := q.VisibleChannelMessageIDs(ctx, db.VisibleChannelMessageIDsParams{BoxID: box, ChannelID: room, MessageIds: msgs, Floor: 0})
			return err
		},
		"RecordReceipts": func(q *db.Queries) error {
			return q.RecordReceipts(ctx, db.RecordReceiptsParams{BoxID: box, AgentID: reader, SessionID: session, MessageIds: msgs})
		},
		"GetMessage": func(q *db.Queries) error {
			_, err := q.GetMessage(ctx, db.GetMessageParams{BoxID: box, MessageID: msgs[0]})
			return err
		},
		// The idempotency sweeper's batch (not a call's, but it meets an old box's whole backlog).
		"DeleteExpiredIdempotencyRecords": func(q *db.Queries) error {
			_, err := q.DeleteExpiredIdempotencyRecords(ctx, db.DeleteExpiredIdempotencyRecordsParams{BoxID: box, Now: now, MaxRows: 1000})
			return err
		},
	}
}
