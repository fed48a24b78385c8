package reliability

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
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

	// sendThroughEveryInstance starts streamWriters writers (a, b and c, round-robin over the
	// instances), each sending streamPerWriter messages to dest; done is set once all have.
	sendThroughEveryInstance := func(t *testing.T, dest map[string]any) (done *atomic.Bool) {
		done = new(atomic.Bool)
		var wg sync.WaitGroup
		for i := range streamWriters {
			sender := on([]*testenv.Agent{a, b, c}[i%3], i)
			wg.Go(func() {
				for j := range streamPerWriter {
					r := sender.Call("POST", "/messages", map[string]any{"destination": dest,
						"body_md": fmt.Sprintf("stream %d-%d", i, j), "idempotency_key": uuid.NewString()})
					if r.Status != http.StatusOK {
						t.Errorf("send: %d %s", r.Status, r.Raw)
						return
					}
				}
			})
		}
		go func() { wg.Wait(); done.Store(true) }()
		return done
	}

	t.Run("inbox stream: sends through every instance, a reader on each sees every row once, ascending", func(t *testing.T) {
		// Inbox locks before inbox_seq (SPEC §7): a reader that has passed a row never later
		// finds a newly committed row below it, whichever instance committed it.
		reader := e.NewAgent("alpha", "stream-reader", nil)
		done := sendThroughEveryInstance(t, map[string]any{"kind": "dm", "recipient_agent_id": reader.ID})
		sessions := []*testenv.Agent{on(reader, 1).WithSession("stream-0"), on(reader, 2).WithSession("stream-1")}
		seen := make([][]int64, len(sessions))
		for _, sess := range sessions {
			sess.Prime()
		}
		parallel(len(sessions), func(k int) { // readers report with t.Errorf: not the test's goroutine
			seen[k] = followStream(t, done, func(cursor string) (streamPage, error) {
				return getPage(sessions[k], "/inbox?limit=5"+cursorParam(cursor))
			})
		})
		for k, seqs := range seen {
			checkAscendingOnce(t, fmt.Sprint("reader ", k), seqs, streamWriters*streamPerWriter)
		}
	})

	t.Run("conversation stream: posts through every instance, a reader sees every message once, ascending", func(t *testing.T) {
		// The channel lock before message_seq (SPEC §10), across instances.
		room := a.MustCall("POST", "/rooms", map[string]any{"name": "stream-room", "invitee_agent_ids": []uuid.UUID{b.ID, c.ID}, "idempotency_key": uuid.NewString()})["room_id"].(string)
		for _, m := range []*testenv.Agent{b, c} {
			m.MustCall("POST", "/rooms/"+room+"/join", map[string]any{"idempotency_key": uuid.NewString()})
		}
		done := sendThroughEveryInstance(t, map[string]any{"kind": "room", "room_id": room})
		seqs := followStream(t, done, func(cursor string) (streamPage, error) {
			return getPage(on(a, 2), "/conversation?destination%5Bkind%5D=room&destination%5Broom_id%5D="+room+"&limit=7"+cursorParam(cursor))
		})
		checkAscendingOnce(t, "conversation", seqs, streamWriters*streamPerWriter)
	})

	t.Run("revocation: a key revoked through one instance is refused by every instance at once, before any body error", func(t *testing.T) {
		d := e.NewAgent("alpha", "revoked-d", nil)
		d.Prime()
		for i := range envs { // every instance has served the key, so each knows it
			if r := on(d, i).Call("GET", "/checkpoint", nil); r.Status != http.StatusOK {
				t.Fatalf("instance %d before: %d %s", i, r.Status, r.Raw)
			}
		}
		reference := e.Do("GET", "/api/v1/boxes/alpha/checkpoint", "abk_nonsense", nil, nil)
		// Calls through every instance while the key is revoked: none started after the
		// revocation returned is answered with anything but the unknown key's AUTH_FAILED.
		var revokedAt atomic.Int64
		var wg sync.WaitGroup
		for i := range 6 {
			x := on(d, i)
			wg.Go(func() {
				for n := 0; ; n++ {
					after := revokedAt.Load() != 0
					body := map[string]any{"destination": map[string]any{"kind": "dm", "recipient_agent_id": a.ID},
						"body_md": fmt.Sprintf("revoked %v %d-%d", after, i, n), "idempotency_key": uuid.NewString()}
					var r testenv.Response
					switch n % 3 {
					case 0:
						r = x.Call("POST", "/messages", body)
					case 1:
						r = x.Call("GET", "/checkpoint", nil)
					default: // a malformed body: still AUTH_FAILED, never a body error
						r = x.Env.Do("POST", "/api/v1/boxes/alpha/messages", x.Key, "{not json", nil)
					}
					if after {
						if r.Status != http.StatusUnauthorized || !bytes.Equal(r.Raw, reference.Raw) {
							t.Errorf("instance %d, call %d after the revocation: %d %s", i%len(envs), n, r.Status, r.Raw)
						}
						if n > 30 {
							return
						}
					}
				}
			})
		}
		e.Admin("POST", "/boxes/alpha/keys/"+d.KeyID+"/revoke", nil)
		revokedAt.Store(time.Now().UnixNano())
		wg.Wait()
		if n := count(`SELECT count(*) FROM messages WHERE body_md LIKE 'revoked true %'`); n != 0 {
			t.Fatalf("%d sends started after the revocation were stored", n)
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

// The stream subtests' writers and messages per writer.
const streamWriters, streamPerWriter = 6, 12

// streamPage is the part of an inbox or conversation page a stream reader follows.
type streamPage struct {
	Items []struct {
		InboxSeq   string `json:"inbox_seq"`
		MessageSeq string `json:"message_seq"`
	} `json:"items"`
	NextCursor   string `json:"next_cursor"`
	ResumeCursor string `json:"resume_cursor"`
}

func getPage(a *testenv.Agent, path string) (streamPage, error) {
	var p streamPage
	r := a.Call("GET", path, nil)
	if r.Status != http.StatusOK {
		return p, fmt.Errorf("GET %s: %d %s", path, r.Status, r.Raw)
	}
	return p, json.Unmarshal(r.Raw, &p)
}

func cursorParam(cursor string) string {
	if cursor == "" {
		return ""
	}
	return "&cursor=" + url.QueryEscape(cursor)
}

// followStream pages a stream with next and resume cursors while writers run, until a chain
// of pages that started (and so fixed its upper bound) after done was set is exhausted, and
// returns the sequence values it saw (inbox_seq or message_seq), in the order seen. It may run
// on a goroutine of its own: a failure is reported with t.Errorf and ends the walk (nil).
func followStream(t *testing.T, done *atomic.Bool, get func(cursor string) (streamPage, error)) []int64 {
	var seqs []int64
	cursor, following, finalChain := "", false, false
	for {
		if !following {
			finalChain = done.Load()
		}
		p, err := get(cursor)
		if err != nil {
			t.Errorf("stream page: %v", err)
			return nil
		}
		for _, it := range p.Items {
			v := it.InboxSeq
			if v == "" {
				v = it.MessageSeq
			}
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Errorf("sequence value %q: %v", v, err)
				return nil
			}
			seqs = append(seqs, n)
		}
		if following = p.NextCursor != ""; following {
			cursor = p.NextCursor
			continue
		}
		cursor = p.ResumeCursor
		if finalChain {
			return seqs
		}
	}
}

func checkAscendingOnce(t *testing.T, who string, seqs []int64, want int) {
	t.Helper()
	for i := 1; i < len(seqs); i++ {
		if seqs[i] <= seqs[i-1] {
			t.Fatalf("%s: %d after %d (a row below one it had passed, or one seen twice)", who, seqs[i], seqs[i-1])
		}
	}
	if len(seqs) != want {
		t.Fatalf("%s saw %d of %d", who, len(seqs), want)
	}
}
