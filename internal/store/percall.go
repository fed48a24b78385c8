package store

import (
	"strings"

	"github.com/jackc/pgx/v5"
)

// Statements planned with their parameters at every call. Every other statement is prepared
// once per connection, and after five executions PostgreSQL may keep a generic plan, made
// with the parameters unknown, until the tables are analyzed again.
//
// An agent's expired leases must be reached through attention_lease_expiry. In a generic plan
// the expiry bound (@now) is unknown, the planner takes a third of the agent's rows for
// expired, and an agent's rows are estimated at a row or two whatever its inbox holds
// (0010_inbox_paths.sql keeps no statistics on box_id and agent_id). A bitmap scan of
// attention_pkey on (box_id, agent_id), with every lease condition a filter, can then cost
// less on paper than the expiry range: a walk of the agent's whole inbox at every claim. Seen
// in the benchmark's W4 drain, in 4 of 22 runs at a 250k backlog, once the store's own ANALYZE
// (statistics.go) re-planned the claim statement halfway: 255 ms and 15,000 buffers per claim
// on a 250,000-row inbox, where the custom plan of the same call read 310 buffers in 0.3 ms.
// The drain ran at a third of its rate, and the connections kept the plan for the rest of the
// run (issue 10). InboxCounts' count of live leases (lease_expires_at > @now) took the same walk
// in the same state (generic plans made every second during W4 drains chose it for both
// statements in the same seconds, 12 of 21 in one run of five).
//
// With the bound a value, the expiry range is the only plan that reads nothing when no lease
// has expired. The hot statements get it from two functions, inbox_lock_expired_leases and
// inbox_live_leases (0019_expired_lease_lookups.sql), which plan just that lookup with its
// values at every call (EXECUTE … USING), about 0.1-0.2 ms, while the statements around them
// keep their cached plans. Planning LockClaimCandidatesOldest whole at every call, as this list
// did before, cost about 0.7 ms per claim on an idle machine (0.5 ms per InboxCounts), against
// 0.02 ms for a cached generic plan.
//
// Listed here: the claim's fallback statements, whose expired branch checks each row's
// accessibility in the scan (a shape of its own). They run only when a full batch of candidates
// held a row the agent can no longer read, so their planning costs nothing in the common case.
var plannedPerCall = map[string]bool{
	"ClaimAccessibleOldest": true,
	"ClaimAccessibleNewest": true,
}

// perCall reports whether a generated statement (its SQL opens with sqlc's "-- name: X")
// is planned per call.
func perCall(sql string) bool {
	name, ok := strings.CutPrefix(sql, "-- name: ")
	if !ok {
		return false
	}
	name, _, _ = strings.Cut(name, " ")
	return plannedPerCall[name]
}

// execArgs are the arguments pgx gets for a statement: one planned per call goes as an
// unnamed statement (its description cached), which PostgreSQL plans with the parameters it
// is bound to. pgx sends a batch's statements in the connection's mode (prepared), so such a
// statement never rides in a pipeline (sendSteps refuses it) nor behind BEGIN (txConn sends
// BEGIN first).
func execArgs(sql string, args []any) []any {
	if !perCall(sql) {
		return args
	}
	return append([]any{pgx.QueryExecModeCacheDescribe}, args...)
}
