package service_test

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentbox/agentbox/internal/faultproxy"
	"github.com/agentbox/agentbox/internal/testenv"
)

// Honest outcomes (SPEC §12): a second server process reaches the test database through a
// TCP proxy the test can sever. COMMIT is held in flight deterministically by a deferred
// constraint trigger (installed in this test's database only) that waits for an advisory
// lock the test holds; the connection is then cut or its backend terminated.

const commitGateLock = 4242

// faultEnv is a world whose agent a also talks to a server behind a fault proxy.
type faultEnv struct {
	w     *world
	proxy *faultproxy.Proxy
	via   *testenv.Env // the server whose database connections go through proxy
}

func newFaultEnv(t *testing.T) *faultEnv {
	t.Helper()
	w := newWorld(t, "a", "b")
	via, proxy := testenv.AttachFaulty(t, w.e)
	return &faultEnv{w: w, proxy: proxy, via: via}
}

// gateCommits makes every COMMIT of a transaction that inserted a message wait for the
// advisory lock, which the returned connection holds until release is called.
func (f *faultEnv) gateCommits(t *testing.T) (release func()) { return f.gateCommitsOf(t, "messages") }

// gateCommitsOf is gateCommits for the transactions that insert into table.
func (f *faultEnv) gateCommitsOf(t *testing.T, table string) (release func()) {
	t.Helper()
	ctx := context.Background()
	pool := f.w.e.Store.Pool()
	if _, err := pool.Exec(ctx, `
CREATE FUNCTION test_commit_gate() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN PERFORM pg_advisory_xact_lock_shared(`+strconv.Itoa(commitGateLock)+`); RETURN NULL; END $$;
CREATE CONSTRAINT TRIGGER test_commit_gate AFTER INSERT ON `+table+`
  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION test_commit_gate();`); err != nil {
		t.Fatal(err)
	}
	holder, err := pgx.Connect(ctx, f.w.e.DBURL)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := holder.Exec(ctx, `SELECT pg_advisory_lock($1)`, commitGateLock); err != nil {
		t.Fatal(err)
	}
	done := false
	release = func() {
		if !done {
			done = true
			holder.Close(ctx)
		}
	}
	t.Cleanup(release)
	return release
}

// waitingBackend polls until a backend of this database waits on a lock, and returns its pid.
func (f *faultEnv) waitingBackend(t *testing.T) int {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		var pid int
		err := f.w.e.Store.Pool().QueryRow(context.Background(), `
SELECT pid FROM pg_stat_activity
WHERE datname = current_database() AND wait_event_type = 'Lock' AND pid <> pg_backend_pid() LIMIT 1`).Scan(&pid)
		if err == nil {
			return pid
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatal("no backend started waiting")
	return 0
}

// waitNoBackend polls until backend pid has ended.
func (f *faultEnv) waitNoBackend(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if dbInt(t, f.w.e, `SELECT count(*) FROM pg_stat_activity WHERE pid = $1`, pid) == 0 {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("backend %d did not end", pid)
}

// async runs call in the background and returns its response channel.
func async(call func() testenv.Response) <-chan testenv.Response {
	ch := make(chan testenv.Response, 1)
	go func() { ch <- call() }()
	return ch
}

func expectOutcomeUnknown(t *testing.T, r testenv.Response) {
	t.Helper()
	e, _ := r.JSON()["error"].(map[string]any)
	if r.Status != http.StatusServiceUnavailable || r.Code() != "TEMPORARILY_UNAVAILABLE" || e["retryable"] != true ||
		r.ErrorField("reason") != "outcome_unknown" || r.ErrorField("suggested_action") == "" {
		t.Fatalf("want 503 TEMPORARILY_UNAVAILABLE retryable outcome_unknown with a suggested action, got %d %s", r.Status, r.Raw)
	}
}

// Finding 1 and 2: the connection is lost while COMMIT is in flight and the transaction
// commits anyway. The answer is not STORAGE_FAILURE ("nothing was written") but a retryable
// unknown outcome; the retry with the same key returns the message that was written.
func TestConnectionLostDuringCommitIsOutcomeUnknown(t *testing.T) {
	t.Parallel()
	f := newFaultEnv(t)
	a, b := f.w.agents["a"], f.w.agents["b"]
	release := f.gateCommits(t)
	send := map[string]any{"destination": dmTo(b), "body_md": "committed in the dark", "idempotency_key": "k1"}

	answer := async(func() testenv.Response { return a.On(f.via).Call("POST", "/messages", send) })
	pid := f.waitingBackend(t) // COMMIT sent, its deferred trigger waiting
	// A partition: the connection is gone and the driver's cancel request cannot get through.
	f.proxy.Refuse(true)
	f.proxy.Cut()
	expectOutcomeUnknown(t, <-answer)

	release() // the orphaned backend finishes its COMMIT: the message was written
	f.waitNoBackend(t, pid)
	if n := dbInt(t, f.w.e, `SELECT count(*) FROM messages`); n != 1 {
		t.Fatalf("the COMMIT in flight should have committed: %d messages", n)
	}
	retry := a.Call("POST", "/messages", send)
	if retry.Status != http.StatusOK {
		t.Fatalf("retry: %d %s", retry.Status, retry.Raw)
	}
	var stored string
	if err := f.w.e.Store.Pool().QueryRow(context.Background(), `SELECT message_id::text FROM messages`).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if got := retry.JSON()["message_id"]; got != stored || retry.JSON()["status"] != "sent" {
		t.Fatalf("the retry must return the committed message %s: %s", stored, retry.Raw)
	}
	if n := dbInt(t, f.w.e, `SELECT count(*) FROM messages`); n != 1 {
		t.Fatalf("retry duplicated the message: %d", n)
	}
}

// The backend is terminated while COMMIT is in flight (what a fast shutdown does): the
// server says FATAL, the client cannot know whether COMMIT happened, so the answer is the
// same unknown outcome; here the transaction rolled back and the retry writes it once.
func TestBackendTerminatedDuringCommitIsOutcomeUnknown(t *testing.T) {
	t.Parallel()
	f := newFaultEnv(t)
	a, b := f.w.agents["a"], f.w.agents["b"]
	f.gateCommits(t)
	send := map[string]any{"destination": dmTo(b), "body_md": "terminated", "idempotency_key": "k1"}

	answer := async(func() testenv.Response { return a.On(f.via).Call("POST", "/messages", send) })
	pid := f.waitingBackend(t)
	if _, err := f.w.e.Store.Pool().Exec(context.Background(), `SELECT pg_terminate_backend($1)`, pid); err != nil {
		t.Fatal(err)
	}
	expectOutcomeUnknown(t, <-answer)
	f.waitNoBackend(t, pid)
	if n := dbInt(t, f.w.e, `SELECT count(*) FROM messages`); n != 0 {
		t.Fatalf("a terminated COMMIT wait rolls back: %d messages", n)
	}
	// The gate still holds new commits; drop it, then the retry writes the message once.
	if _, err := f.w.e.Store.Pool().Exec(context.Background(), `DROP TRIGGER test_commit_gate ON messages`); err != nil {
		t.Fatal(err)
	}
	if r := a.Call("POST", "/messages", send); r.Status != http.StatusOK || r.JSON()["status"] != "sent" {
		t.Fatalf("retry: %d %s", r.Status, r.Raw)
	}
	if n := dbInt(t, f.w.e, `SELECT count(*) FROM messages`); n != 1 {
		t.Fatalf("want exactly one message, got %d", n)
	}
}

// Pooled connections the database closed (a restart, idle sessions ended by the server or a
// DBA) cost no call: a transaction whose first round trip finds its connection dead runs again
// on a fresh one (outside probe: after a restart or pg_terminate_backend of the idle backends,
// each dead connection failed one call with 503 though the database was up).
func TestDeadPooledConnectionsCostNoCall(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "a", "b")
	a, b, e := w.agents["a"], w.agents["b"], w.e
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, e.DBURL)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx) //nolint:errcheck
	for round := range 3 {
		var wg sync.WaitGroup // several pooled connections
		for range 8 {
			wg.Go(func() { a.Call("GET", "/checkpoint", nil) })
		}
		wg.Wait()
		kill := func() {
			t.Helper()
			var killed int
			if err := admin.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
				WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend'`).Scan(&killed); err != nil || killed == 0 {
				t.Fatalf("terminated %d backends: %v", killed, err)
			}
		}
		kill()
		if r := e.Do("GET", "/readyz", "", nil, nil); r.Status != http.StatusOK {
			t.Fatalf("round %d: readyz right after the backends ended: %d %s", round, r.Status, r.Raw)
		}
		wg = sync.WaitGroup{}
		for range 8 {
			wg.Go(func() { a.Call("GET", "/checkpoint", nil) })
		}
		wg.Wait()
		kill()
		for i := range 10 {
			if r := a.Call("GET", "/checkpoint", nil); r.Status != http.StatusOK {
				t.Fatalf("round %d, read %d after the backends ended: %d %s", round, i, r.Status, r.Raw)
			}
			if r := a.Call("POST", "/messages", map[string]any{"destination": dmTo(b), "body_md": fmt.Sprintf("r%d m%d", round, i), "idempotency_key": newKey()}); r.Status != http.StatusOK {
				t.Fatalf("round %d, send %d after the backends ended: %d %s", round, i, r.Status, r.Raw)
			}
		}
		if r := e.Do("GET", "/readyz", "", nil, nil); r.Status != http.StatusOK {
			t.Fatalf("readyz: %d %s", r.Status, r.Raw)
		}
	}
}

// A database that takes no writes (a standby after a failover, a primary set read-only) is
// a passing state, not a failed write: calls that write are TEMPORARILY_UNAVAILABLE
// database_unavailable, retryable, nothing written, and /readyz says the instance cannot
// serve (outside probe: every write was a final STORAGE_FAILURE and /readyz said ready).
func TestReadOnlyDatabaseIsUnavailable(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "a", "b")
	a, b, e := w.agents["a"], w.agents["b"], w.e
	ctx := context.Background()
	var name string
	if err := e.Store.Pool().QueryRow(ctx, `SELECT current_database()`).Scan(&name); err != nil {
		t.Fatal(err)
	}
	admin, err := pgx.Connect(ctx, e.DBURL) // opened before: it stays writable
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx) //nolint:errcheck
	readOnly := func(on bool) {
		t.Helper()
		q := `ALTER DATABASE ` + pgx.Identifier{name}.Sanitize() + ` RESET default_transaction_read_only`
		if on {
			q = `ALTER DATABASE ` + pgx.Identifier{name}.Sanitize() + ` SET default_transaction_read_only = on`
		}
		if _, err := admin.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
		e.Store.Pool().Reset() // new connections take the setting
	}
	readOnly(true)
	send := map[string]any{"destination": dmTo(b), "body_md": "while read-only", "idempotency_key": "ro-1"}
	r := a.Call("POST", "/messages", send)
	expectErr(t, "send to a read-only database", r, "TEMPORARILY_UNAVAILABLE", "database_unavailable", "")
	if e, _ := r.JSON()["error"].(map[string]any); e["retryable"] != true {
		t.Fatalf("not retryable: %s", r.Raw)
	}
	if r := e.Do("GET", "/readyz", "", nil, nil); r.Status != http.StatusServiceUnavailable {
		t.Fatalf("readyz on a read-only database: %d %s", r.Status, r.Raw)
	}
	readOnly(false)
	if r := a.Call("POST", "/messages", send); r.Status != http.StatusOK || r.JSON()["status"] != "sent" {
		t.Fatalf("the retry once writes are back: %d %s", r.Status, r.Raw)
	}
	if n := dbInt(t, e, `SELECT count(*) FROM messages`); n != 1 {
		t.Fatalf("%d messages, want 1", n)
	}
}

// An admin write whose COMMIT's outcome is unknown says so without the agent calls' advice
// to retry with the same idempotency_key, which admin calls do not take (outside probe: a
// retried key create left a second live key nobody was shown).
func TestAdminOutcomeUnknownSaysToCheckFirst(t *testing.T) {
	t.Parallel()
	f := newFaultEnv(t)
	f.gateCommitsOf(t, "api_keys")
	answer := async(func() testenv.Response {
		return f.via.Do("POST", "/admin/api/v1/boxes/alpha/agents/a/keys", testenv.AdminToken, map[string]any{}, nil)
	})
	pid := f.waitingBackend(t)
	if _, err := f.w.e.Store.Pool().Exec(context.Background(), `SELECT pg_terminate_backend($1)`, pid); err != nil {
		t.Fatal(err)
	}
	r := <-answer
	expectOutcomeUnknown(t, r)
	if s := r.ErrorField("suggested_action"); strings.Contains(s, "same idempotency_key") || !strings.Contains(s, "list") {
		t.Fatalf("admin outcome_unknown advice: %q", s)
	}
}

// A connection lost before COMMIT was sent: the server aborts the transaction, so the
// answer is a retryable TEMPORARILY_UNAVAILABLE (not outcome_unknown) and nothing is written.
func TestConnectionLostBeforeCommitIsRetryable(t *testing.T) {
	t.Parallel()
	f := newFaultEnv(t)
	a, b := f.w.agents["a"], f.w.agents["b"]
	a.MustCall("POST", "/messages", map[string]any{"destination": dmTo(b), "body_md": "first", "idempotency_key": newKey()})

	// Hold the DM channel's row lock: the next send waits on it mid-transaction.
	ctx := context.Background()
	locker, err := f.w.e.Store.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer locker.Rollback(ctx) //nolint:errcheck
	if _, err := locker.Exec(ctx, `SELECT 1 FROM channels FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	before := dbState(t, f.w.e)
	answer := async(func() testenv.Response {
		return a.On(f.via).Call("POST", "/messages", map[string]any{"destination": dmTo(b), "body_md": "second", "idempotency_key": newKey()})
	})
	pid := f.waitingBackend(t)
	f.proxy.Cut()
	r := <-answer
	expectErr(t, "lost before commit", r, "TEMPORARILY_UNAVAILABLE", "database_unavailable", "")
	if e, _ := r.JSON()["error"].(map[string]any); e["retryable"] != true || r.Status != http.StatusServiceUnavailable {
		t.Fatalf("want 503 retryable: %d %s", r.Status, r.Raw)
	}
	locker.Rollback(ctx) //nolint:errcheck
	f.waitNoBackend(t, pid)
	if after := dbState(t, f.w.e); after != before {
		t.Fatalf("a transaction whose connection was lost before COMMIT wrote something:\n%s\n%s", before, after)
	}
}

// The database unreachable: agent reads and mutations and admin operations are retryable
// TEMPORARILY_UNAVAILABLE, never STORAGE_FAILURE or AUTH_FAILED; service resumes afterwards.
func TestDatabaseUnreachableIsRetryable(t *testing.T) {
	t.Parallel()
	f := newFaultEnv(t)
	a := f.w.agents["a"].On(f.via)
	f.proxy.Refuse(true)
	f.proxy.Cut()
	for _, r := range []testenv.Response{
		a.Call("GET", "/checkpoint", nil),
		a.Call("PUT", "/checkpoint", map[string]any{"expected_revision": "0", "checkpoint": map[string]any{"x": 1}, "idempotency_key": newKey()}),
		f.via.Do("POST", "/admin/api/v1/boxes", testenv.AdminToken, map[string]any{"box_key": "beta"}, nil),
		f.via.Do("GET", "/admin/api/v1/boxes", "issued-token-cannot-be-checked", nil, nil),
	} {
		expectErr(t, "database unreachable", r, "TEMPORARILY_UNAVAILABLE", "database_unavailable", "")
		if e, _ := r.JSON()["error"].(map[string]any); e["retryable"] != true || r.Status != http.StatusServiceUnavailable {
			t.Fatalf("want 503 retryable: %d %s", r.Status, r.Raw)
		}
	}
	f.proxy.Refuse(false)
	if r := a.Call("GET", "/checkpoint", nil); r.Status != http.StatusOK {
		t.Fatalf("after the outage: %d %s", r.Status, r.Raw)
	}
}

// A database that hangs rather than fails (a stopped postmaster: connections stay open and
// nothing answers) ends a call as TEMPORARILY_UNAVAILABLE once the call's bound
// (store.CallTimeout, shortened here) has passed, instead of holding it for as long as the
// database hangs, and within one bound (not one for the call and another for its key's
// check); /readyz answers 503 within its own bound; nothing is written, and once the
// database answers again the same key's retry writes exactly once.
func TestDatabaseHangIsRetryable(t *testing.T) {
	t.Parallel()
	f := newFaultEnv(t)
	const bound = 2 * time.Second
	f.via.Store.SetCallTimeout(bound)
	a := f.w.agents["a"].On(f.via)
	if r := a.Call("GET", "/checkpoint", nil); r.Status != http.StatusOK { // a pooled connection exists
		t.Fatalf("before the hang: %d %s", r.Status, r.Raw)
	}
	key := newKey()
	save := map[string]any{"expected_revision": "0", "checkpoint": map[string]any{"x": 1}, "idempotency_key": key}
	f.proxy.Stall(true)
	for _, call := range []func() testenv.Response{
		func() testenv.Response { return a.Call("GET", "/checkpoint", nil) },
		func() testenv.Response { return a.Call("PUT", "/checkpoint", save) },
		func() testenv.Response { return a.Call("GET", "/inbox", nil) },
	} {
		// One bound per call: the key's check, which was to ride in the failed transaction,
		// is not tried again on its own (that waited a second bound before the answer left).
		start := time.Now()
		r := call()
		if took := time.Since(start); took >= 2*bound {
			t.Fatalf("a call waited %v for a hung database, two bounds of %v", took, bound)
		}
		expectErr(t, "database hangs", r, "TEMPORARILY_UNAVAILABLE", "database_unavailable", "")
		if e, _ := r.JSON()["error"].(map[string]any); e["retryable"] != true || r.Status != http.StatusServiceUnavailable {
			t.Fatalf("want 503 retryable: %d %s", r.Status, r.Raw)
		}
	}
	// Admin calls too, a settings update that lowers no cap included (outside probe: it kept
	// the long bound of a retroactive cleanup, 10 minutes, whatever it changed).
	for _, call := range []func() testenv.Response{
		func() testenv.Response {
			return f.via.Do("PATCH", "/admin/api/v1/boxes/alpha/settings", testenv.AdminToken, map[string]any{"settings": map[string]any{"lease_default_seconds": 61}}, nil)
		},
		func() testenv.Response {
			return f.via.Do("GET", "/admin/api/v1/boxes/alpha/settings", testenv.AdminToken, nil, nil)
		},
	} {
		start := time.Now()
		r := call()
		if took := time.Since(start); took >= 2*bound {
			t.Fatalf("an admin call waited %v for a hung database, two bounds of %v", took, bound)
		}
		expectErr(t, "database hangs (admin)", r, "TEMPORARILY_UNAVAILABLE", "database_unavailable", "")
	}
	if r := f.via.Do("GET", "/readyz", "", nil, nil); r.Status != http.StatusServiceUnavailable {
		t.Fatalf("readyz while the database hangs: %d %s", r.Status, r.Raw)
	}
	f.proxy.Stall(false)
	var r testenv.Response
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); {
		if r = a.Call("PUT", "/checkpoint", save); r.Status == http.StatusOK {
			break
		}
	}
	if r.Status != http.StatusOK || r.JSON()["revision"] != "1" {
		t.Fatalf("retry after the hang: %d %s", r.Status, r.Raw)
	}
	if n := dbInt(t, f.w.e, `SELECT count(*) FROM idempotency_records WHERE idem_key = $1`, key); n != 1 {
		t.Fatalf("%d idempotency records for the key, want 1", n)
	}
}

// /mcp during an outage, for a key this server has admitted before: a tool call's answer is
// the tool error SPEC §12 describes (isError, TEMPORARILY_UNAVAILABLE, retryable), not an
// HTTP 503 that MCP clients report as a transport failure; tools/list still answers. (A key
// the server has not seen cannot be checked at all: that stays the HTTP 503.)
func TestMCPOutageIsAToolError(t *testing.T) {
	t.Parallel()
	f := newFaultEnv(t)
	key := f.w.agents["a"].Key
	if isErr, _, raw := mcpToolCall(t, f.via, key, "checkpoint_get", `{"box_key":"alpha"}`); isErr {
		t.Fatalf("before the outage: %s", raw)
	}
	f.proxy.Refuse(true)
	f.proxy.Cut()
	isErr, content, raw := mcpToolCall(t, f.via, key, "checkpoint_get", `{"box_key":"alpha"}`)
	e, _ := content["error"].(map[string]any)
	if !isErr || e["code"] != "TEMPORARILY_UNAVAILABLE" || e["retryable"] != true {
		t.Fatalf("tool call during the outage: %s", raw)
	}
	if status, m, raw := mcpCall(t, f.via, key, []byte(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)); status != http.StatusOK || m["result"] == nil {
		t.Fatalf("tools/list during the outage: %d %s", status, raw)
	}
	if status, _, raw := mcpCall(t, f.via, "ab_not_a_key_this_server_has_seen", []byte(`{"jsonrpc":"2.0","id":3,"method":"tools/list"}`)); status != http.StatusServiceUnavailable {
		t.Fatalf("an unseen key during the outage: %d %s", status, raw)
	}
	f.proxy.Refuse(false)
	if isErr, _, raw := mcpToolCall(t, f.via, key, "checkpoint_get", `{"box_key":"alpha"}`); isErr {
		t.Fatalf("after the outage: %s", raw)
	}
}

// A stopping server does not wait on a database that hangs: pgx would wait up to 15 s per
// connection for its cancel request to be answered (pgconn's asyncClose), so Store.CloseWithin
// gives up after its bound, and says so.
func TestClosingDoesNotWaitForAHungDatabase(t *testing.T) {
	t.Parallel()
	f := newFaultEnv(t)
	f.via.Store.SetCallTimeout(time.Second)
	a := f.w.agents["a"].On(f.via)
	if r := a.Call("GET", "/checkpoint", nil); r.Status != http.StatusOK {
		t.Fatalf("before the hang: %d %s", r.Status, r.Raw)
	}
	f.proxy.Stall(true)
	defer f.proxy.Stall(false)
	if r := a.Call("GET", "/checkpoint", nil); r.Status != http.StatusServiceUnavailable {
		t.Fatalf("while the database hangs: %d %s", r.Status, r.Raw)
	}
	start := time.Now()
	if f.via.Store.CloseWithin(time.Second) {
		t.Fatal("the pool reported closed while its connection to a hung database was still being cancelled")
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("CloseWithin(1s) took %v", took)
	}
}
