package store

import (
	"strings"

	"github.com/jackc/pgx/v5"
)

// Statements planned with their parameters at every call. Every other statement is prepared
// once per connection, and after five executions PostgreSQL may keep a generic plan, made
// with the parameters unknown, until the tables are analyzed again.
//
// The claim statements' "expired" branch (queries/inbox.sql) must reach an agent's expired
// leases through attention_lease_expiry. In a generic plan the expiry bound (@now) is unknown,
// the planner takes a third of the agent's rows for expired, and an agent's rows are estimated
// at a row or two whatever its inbox holds (0010_inbox_paths.sql keeps no statistics on
// box_id and agent_id). A bitmap scan of attention_pkey on (box_id, agent_id), with every
// lease condition a filter, can then cost less on paper than the expiry range: a walk of the
// agent's whole inbox at every claim. Seen in the benchmark's W4 drain, in 4 of 22 runs at a
// 250k backlog, once the store's own ANALYZE (statistics.go) re-planned the statement halfway: 255 ms
// and 15,000 buffers per claim on a 250,000-row inbox, where the custom plan of the same call
// read 310 buffers in 0.3 ms. The drain ran at a third of its rate, and the connections kept
// the plan for the rest of the run (issue 10). With the bound a value, the expiry range is
// the only plan that reads nothing when no lease has expired.
//
// InboxCounts counts the agent's live leases with the same kind of condition
// (lease_expires_at > @now) and took the same walk in the same state: generic plans made
// every second during W4 drains chose the attention_pkey bitmap scan for both statements in
// the same seconds (12 of 21 in one run of five). inbox_list would then read the whole inbox
// at every call.
//
// The price is planning at every call: about 0.7 ms per claim and 0.5 ms per InboxCounts on
// an idle machine, against 0.02 ms for a cached generic plan.
var plannedPerCall = map[string]bool{
	"LockClaimCandidatesOldest": true,
	"LockClaimCandidatesNewest": true,
	"ClaimAccessibleOldest":     true,
	"ClaimAccessibleNewest":     true,
	"InboxCounts":               true,
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
