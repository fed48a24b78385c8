package service_test

import (
	"context"
	"fmt"
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

// setFollow sets a member's follow preference for its current epoch.
func setFollow(t *testing.T, a *testenv.Agent, room, follow string) {
	t.Helper()
	rev := a.MustCall("GET", "/rooms/"+room, nil)["follow_revision"].(string)
	a.MustCall("PUT", "/rooms/"+room+"/follow", map[string]any{"follow": follow, "expected_revision": rev, "idempotency_key": newKey()})
}

// dbState is every row a messaging or inbox operation could write, for "nothing was
// written" assertions.
func dbState(t *testing.T, e *testenv.Env) string {
	t.Helper()
	var b strings.Builder
	for _, table := range []string{"channels", "messages", "channel_sender_latest", "attention", "receipts",
		"requests", "file_reports", "cleanup_status", "idempotency_records"} {
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
