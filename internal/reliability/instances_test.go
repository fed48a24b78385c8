package reliability

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentbox/agentbox/internal/testdb"
	"github.com/agentbox/agentbox/internal/testenv"
)

// Three `agentbox serve` processes on one database keep every concurrency rule (SPEC §10).
func TestThreeServerProcesses(t *testing.T) {
	t.Parallel()
	dbURL := testdb.New(t)
	procs := []*proc{startServer(t, dbURL), startServer(t, dbURL), startServer(t, dbURL)}
	concurrencyRules(t, dbURL, procs)
}

// The same three processes behind PgBouncer in transaction pooling mode, on an empty
// database: the first one applies the migrations through the pooler.
func TestThreeServerProcessesBehindPgBouncer(t *testing.T) {
	t.Parallel()
	dbURL := testdb.NewEmpty(t)
	via := startPgBouncer(t, dbURL)
	procs := []*proc{startServer(t, via), startServer(t, via), startServer(t, via)}
	concurrencyRules(t, dbURL, procs)
}

// concurrencyRules drives every concurrency rule through procs round-robin and checks the
// outcome against the database (dbURL, direct).
func concurrencyRules(t *testing.T, dbURL string, procs []*proc) {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	count := func(q string, args ...any) int {
		t.Helper()
		var n int
		if err := pool.QueryRow(ctx, q, args...).Scan(&n); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return n
	}
	envs := make([]*testenv.Env, len(procs))
	for i, p := range procs {
		envs[i] = p.env(t)
	}
	e := envs[0]
	e.Box("alpha")
	a := e.NewAgent("alpha", "a", nil)
	b := e.NewAgent("alpha", "b", nil)
	c := e.NewAgent("alpha", "c", nil)
	for _, x := range []*testenv.Agent{a, b, c} {
		x.Prime()
	}
	on := func(x *testenv.Agent, i int) *testenv.Agent { return x.On(envs[i%len(envs)]) }
	parallel := func(n int, fn func(i int)) {
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() { fn(i) })
		}
		wg.Wait()
	}

	t.Run("checkpoint CAS: one of 30 concurrent saves wins", func(t *testing.T) {
		var mu sync.Mutex
		ok, conflicts := 0, 0
		parallel(30, func(i int) {
			r := on(a, i).Call("PUT", "/checkpoint", map[string]any{"expected_revision": "0", "checkpoint": map[string]any{"w": i}, "idempotency_key": fmt.Sprint("cas", i)})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case r.Status == http.StatusOK:
				ok++
			case r.Code() == "REVISION_CONFLICT":
				conflicts++
			default:
				t.Errorf("save: %d %s", r.Status, r.Raw)
			}
		})
		if ok != 1 || conflicts != 29 {
			t.Fatalf("ok=%d conflicts=%d", ok, conflicts)
		}
	})

	t.Run("idempotency: 20 concurrent calls with one key write one message", func(t *testing.T) {
		ids := make([]string, 20)
		parallel(20, func(i int) {
			r := on(a, i).Call("POST", "/messages", map[string]any{"destination": map[string]any{"kind": "dm", "recipient_agent_id": b.ID}, "body_md": "once", "idempotency_key": "same-key"})
			if r.Status != http.StatusOK {
				t.Errorf("send: %d %s", r.Status, r.Raw)
				return
			}
			ids[i], _ = r.JSON()["message_id"].(string)
		})
		for _, id := range ids {
			if id != ids[0] {
				t.Fatalf("replays name different messages: %v", ids)
			}
		}
		if n := count(`SELECT count(*) FROM messages WHERE body_md = 'once'`); n != 1 {
			t.Fatalf("%d messages", n)
		}
	})

	t.Run("duplicate suppression: 20 concurrent identical sends, one is sent", func(t *testing.T) {
		var mu sync.Mutex
		status := map[string]int{}
		parallel(20, func(i int) {
			r := on(a, i).Call("POST", "/messages", map[string]any{"destination": map[string]any{"kind": "dm", "recipient_agent_id": c.ID}, "body_md": "same text", "idempotency_key": uuid.NewString()})
			mu.Lock()
			defer mu.Unlock()
			s, _ := r.JSON()["status"].(string)
			status[s]++
		})
		if status["sent"] != 1 || status["duplicate"] != 19 {
			t.Fatalf("statuses %v", status)
		}
	})

	t.Run("inbox claim: leases are exclusive across sessions and instances", func(t *testing.T) {
		const rows = 40
		parallel(rows, func(i int) {
			r := on(a, i).Call("POST", "/messages", map[string]any{"destination": map[string]any{"kind": "dm", "recipient_agent_id": b.ID}, "body_md": fmt.Sprint("work ", i), "idempotency_key": uuid.NewString()})
			if r.Status != http.StatusOK {
				t.Errorf("send: %d %s", r.Status, r.Raw)
			}
		})
		var mu sync.Mutex
		owner := map[string]int{}
		parallel(6, func(s int) {
			sess := on(b, s).WithSession(fmt.Sprint("worker-", s))
			sess.Prime()
			for {
				r := sess.Call("POST", "/inbox/claim", map[string]any{"limit": 3, "idempotency_key": uuid.NewString()})
				if r.Status != http.StatusOK {
					t.Errorf("claim: %d %s", r.Status, r.Raw)
					return
				}
				var res struct {
					Items []struct {
						InboxSeq string `json:"inbox_seq"`
					} `json:"items"`
				}
				json.Unmarshal(r.Raw, &res) //nolint:errcheck
				if len(res.Items) == 0 {
					return
				}
				mu.Lock()
				for _, it := range res.Items {
					if prev, dup := owner[it.InboxSeq]; dup {
						t.Errorf("row %s leased by sessions %d and %d", it.InboxSeq, prev, s)
					}
					owner[it.InboxSeq] = s
				}
				mu.Unlock()
			}
		})
		if want := count(`SELECT count(*) FROM attention a JOIN agents g ON g.box_id = a.box_id AND g.agent_id = a.agent_id WHERE g.name = 'b'`); len(owner) != want {
			t.Fatalf("%d rows leased, %d in b's inbox", len(owner), want)
		}
	})

	t.Run("rate limit: one bucket per key across instances", func(t *testing.T) {
		const perSecond, burst, calls = 1, 4, 24
		e.Admin("PATCH", "/boxes/alpha/settings", map[string]any{"settings": map[string]any{"rate_limit_per_second": perSecond, "rate_limit_burst": burst}})
		defer e.Admin("PATCH", "/boxes/alpha/settings", map[string]any{"settings": map[string]any{"rate_limit_per_second": 0}})
		start := time.Now()
		var mu sync.Mutex
		ok := 0
		parallel(calls, func(i int) {
			r := on(c, i).Call("GET", "/me", nil)
			if r.Status == http.StatusOK {
				mu.Lock()
				ok++
				mu.Unlock()
			} else if r.Status != http.StatusTooManyRequests {
				t.Errorf("me: %d %s", r.Status, r.Raw)
			}
		})
		if allowed := burst + int(math.Ceil(time.Since(start).Seconds()*perSecond)); ok > allowed || ok < burst {
			t.Fatalf("%d of %d admitted; one shared bucket admits %d..%d", ok, calls, burst, allowed)
		}
	})
}
