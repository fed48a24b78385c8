package service_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/agentbox/agentbox/internal/testenv"
)

// Shared helpers of the service tests.

// newKey is a fresh idempotency key.
func newKey() string { return uuid.NewString() }

// dmTo and inRoom are message destinations.
func dmTo(a *testenv.Agent) map[string]any {
	return map[string]any{"kind": "dm", "recipient_agent_id": a.ID}
}
func inRoom(room string) map[string]any { return map[string]any{"kind": "room", "room_id": room} }

// setDestination encodes a destination as the deepObject query parameter of
// conversation_read and inbox_list.
func setDestination(q url.Values, dest map[string]any) {
	q.Set("destination[kind]", dest["kind"].(string))
	if dest["kind"] == "room" {
		q.Set("destination[room_id]", fmt.Sprint(dest["room_id"]))
	} else {
		q.Set("destination[recipient_agent_id]", fmt.Sprint(dest["recipient_agent_id"]))
	}
}

// setFollow sets a member's follow preference for its current epoch.
func setFollow(t *testing.T, a *testenv.Agent, room, follow string) {
	t.Helper()
	rev := a.MustCall("GET", "/rooms/"+room, nil)["follow_revision"].(string)
	a.MustCall("PUT", "/rooms/"+room+"/follow", map[string]any{"follow": follow, "expected_revision": rev, "idempotency_key": newKey()})
}

// dbState is every row an agent operation could write (agents as their card and flags,
// without last_seen_at), for "nothing was written" assertions.
func dbState(t *testing.T, e *testenv.Env) string {
	t.Helper()
	var b strings.Builder
	for _, table := range []string{"channels", "rooms", "room_members", "messages", "channel_sender_latest", "attention",
		"receipts", "requests", "file_reports", "cleanup_status", "idempotency_records", "attachments",
		"(SELECT box_id, attachment_id, chunk_index, md5(data) FROM attachment_chunks)",
		"(SELECT agent_id, name, enabled, listed, role, description, card_revision, profile_version FROM agents)"} {
		rows, err := e.Store.Pool().Query(context.Background(), `SELECT t::text FROM `+table+` t`)
		if err != nil {
			t.Fatal(err)
		}
		var lines []string
		for rows.Next() {
			var s string
			if err := rows.Scan(&s); err != nil {
				t.Fatal(err)
			}
			lines = append(lines, s)
		}
		rows.Close()
		sort.Strings(lines)
		fmt.Fprintf(&b, "%s (%d)\n%s\n", table, len(lines), strings.Join(lines, "\n"))
	}
	return b.String()
}

// sequences is the last value drawn from every box's message and inbox sequences
// (0025_box_sequences.sql): a dry run allocates no IDs (SPEC §10), so it must leave them
// where they were.
func sequences(t *testing.T, e *testenv.Env) string {
	t.Helper()
	var s string
	if err := e.Store.Pool().QueryRow(context.Background(),
		`SELECT COALESCE(string_agg(sequencename || '=' || COALESCE(last_value::text, 'none'), ', ' ORDER BY sequencename), '')
		 FROM pg_sequences WHERE schemaname = current_schema() AND sequencename <> 'dry_run_seq'`).Scan(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

// expectErr asserts an error's code, reason and field ("-": any field).
func expectErr(t *testing.T, what string, r testenv.Response, code, reason, field string) {
	t.Helper()
	if r.Code() != code || r.ErrorField("reason") != reason || (field != "-" && r.ErrorField("field") != field) {
		t.Fatalf("%s: want %s/%q field %q, got %d %s", what, code, reason, field, r.Status, r.Raw)
	}
}

// rejects runs do, asserts the error, and that nothing was written.
func rejects(t *testing.T, e *testenv.Env, what string, do func() testenv.Response, code, reason, field string) testenv.Response {
	t.Helper()
	before := dbState(t, e)
	r := do()
	expectErr(t, what, r, code, reason, field)
	if after := dbState(t, e); after != before {
		t.Fatalf("%s wrote something:\nbefore:\n%s\nafter:\n%s", what, before, after)
	}
	return r
}

// dbInt runs a single-value query.
func dbInt(t *testing.T, e *testenv.Env, q string, args ...any) int64 {
	t.Helper()
	var v int64
	if err := e.Store.Pool().QueryRow(context.Background(), q, args...).Scan(&v); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return v
}

// world is a box "alpha" with primed agents.
type world struct {
	e      *testenv.Env
	box    string
	agents map[string]*testenv.Agent
}

func newWorld(t *testing.T, names ...string) *world {
	t.Helper()
	e := testenv.New(t)
	w := &world{e: e, box: e.Box("alpha"), agents: map[string]*testenv.Agent{}}
	for _, n := range names {
		w.agents[n] = w.agent(n)
	}
	return w
}

// agent creates and primes another agent in the world's box.
func (w *world) agent(name string) *testenv.Agent {
	a := w.e.NewAgent(w.box, name, nil)
	a.Prime()
	return a
}

func (w *world) settings(values map[string]any) {
	w.e.Admin("PATCH", "/boxes/"+w.box+"/settings", map[string]any{"settings": values})
}

// room creates a room owned by owner with the given members joined (opts go into room_create).
func (w *world) room(t *testing.T, owner *testenv.Agent, members []*testenv.Agent, opts map[string]any) string {
	t.Helper()
	body := map[string]any{"name": "room-" + newKey()[:8], "idempotency_key": newKey()}
	for k, v := range opts {
		body[k] = v
	}
	id := owner.MustCall("POST", "/rooms", body)["room_id"].(string)
	for _, m := range members {
		invite(t, owner, id, m)
		join(t, m, id)
	}
	return id
}

// roomWith is room with default options.
func (w *world) roomWith(t *testing.T, owner *testenv.Agent, members ...*testenv.Agent) string {
	t.Helper()
	return w.room(t, owner, members, nil)
}

func invite(t *testing.T, owner *testenv.Agent, room string, m *testenv.Agent) {
	t.Helper()
	owner.MustCall("POST", "/rooms/"+room+"/invite", map[string]any{"invitee_agent_ids": []uuid.UUID{m.ID}, "idempotency_key": newKey()})
}

func join(t *testing.T, a *testenv.Agent, room string) {
	t.Helper()
	a.MustCall("POST", "/rooms/"+room+"/join", map[string]any{"idempotency_key": newKey()})
}

// pagesWithinBudget pages a keyset list (path carries its own query; each next_cursor is
// appended) from its start to its end under a response byte budget (SPEC §9) and returns every
// item's key in order and the number of pages. Every page's response must fit budget bytes,
// except a page holding one item alone that oversize accepts (as the streams, a row larger than
// the budget is returned alone); a page with a next_cursor is never empty; the last has none.
func pagesWithinBudget(t *testing.T, a *testenv.Agent, path string, budget int, key func(map[string]any) string, oversize func(string) bool) ([]string, int) {
	t.Helper()
	var keys []string
	for pages, cursor := 1, ""; ; pages++ {
		p := path
		if cursor != "" {
			p += "&cursor=" + url.QueryEscape(cursor)
		}
		r := a.Call("GET", p, nil)
		var page struct {
			Items      []map[string]any `json:"items"`
			NextCursor *string          `json:"next_cursor"`
		}
		if r.Status != http.StatusOK || json.Unmarshal(r.Raw, &page) != nil {
			t.Fatalf("GET %s: %d %s", p, r.Status, r.Raw)
		}
		var pageKeys []string
		for _, it := range page.Items {
			pageKeys = append(pageKeys, key(it))
		}
		keys = append(keys, pageKeys...)
		if len(r.Raw) > budget && (len(pageKeys) != 1 || !oversize(pageKeys[0])) {
			t.Fatalf("page %d over the %d-byte budget: %d bytes, items %v", pages, budget, len(r.Raw), pageKeys)
		}
		if page.NextCursor == nil {
			return keys, pages
		}
		if len(page.Items) == 0 {
			t.Fatalf("page %d: an empty page with a next_cursor", pages)
		}
		if pages > 1000 {
			t.Fatal("paging does not end")
		}
		cursor = *page.NextCursor
	}
}

// neverOversize is pagesWithinBudget's oversize for lists whose rows all fit any budget.
func neverOversize(string) bool { return false }
