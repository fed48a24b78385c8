package reliability

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentbox/agentbox/internal/testenv"
)

// sendLoad is `clients` clients each sending `perClient` DMs with unique bodies, retrying
// every uncertain answer (transport error, 503) with the same idempotency key until the
// server gives a definite one. It records what the clients were told.
type sendLoad struct {
	url       func() string
	keys      []string // one API key per client
	recipient string
	clients   int
	perClient int

	mu       sync.Mutex
	told     map[string]string   // body → message_id of the first 2xx
	replays  int                 // 2xx answers for a body that named another message
	codes    map[string]int      // answers by status/code (retries included)
	final    map[string]string   // body → "sent" | a definite error code
	attempts map[string][]string // body → each answer, for diagnostics
	ok       atomic.Int64        // definite 2xx so far
	firstOK  chan struct{}       // signalled on every 2xx (non-blocking)
}

func newSendLoad(url func() string, keys []string, recipient string, perClient int) *sendLoad {
	return &sendLoad{url: url, keys: keys, recipient: recipient, clients: len(keys), perClient: perClient,
		told: map[string]string{}, codes: map[string]int{}, final: map[string]string{}, attempts: map[string][]string{},
		firstOK: make(chan struct{}, 1)}
}

func (l *sendLoad) run(ctx context.Context) {
	var wg sync.WaitGroup
	for c := range l.clients {
		wg.Go(func() {
			for i := range l.perClient {
				l.send(ctx, c, fmt.Sprintf("load c%d m%d", c, i))
			}
		})
	}
	wg.Wait()
}

func (l *sendLoad) send(ctx context.Context, client int, body string) {
	in := map[string]any{"destination": map[string]any{"kind": "dm", "recipient_agent_id": l.recipient}, "body_md": body, "idempotency_key": body}
	backoff := 5 * time.Millisecond
	for {
		a := do(ctx, l.url(), "POST", "/api/v1/boxes/alpha/messages", l.keys[client], in)
		label := fmt.Sprint(a.status)
		if a.err != nil {
			label = "transport error"
		} else if a.code() != "" {
			label = fmt.Sprintf("%d %s", a.status, a.code())
			if r := a.reason(); r != "" {
				label += " " + r
			}
		}
		l.mu.Lock()
		l.codes[label]++
		l.attempts[body] = append(l.attempts[body], label)
		l.mu.Unlock()
		switch {
		case a.err == nil && a.status == http.StatusOK:
			id, _ := a.body["message_id"].(string)
			l.mu.Lock()
			if prev, seen := l.told[body]; seen && prev != id {
				l.replays++
			} else if !seen {
				l.told[body] = id
			}
			l.final[body] = "sent"
			l.mu.Unlock()
			l.ok.Add(1)
			select {
			case l.firstOK <- struct{}{}:
			default:
			}
			return
		case a.err != nil || a.retryable():
			if ctx.Err() != nil {
				return
			}
			time.Sleep(backoff)
			backoff = min(2*backoff, 200*time.Millisecond)
		default:
			l.mu.Lock()
			l.final[body] = a.code()
			l.mu.Unlock()
			return
		}
	}
}

// verdict compares what the clients were told with the database.
type verdict struct {
	sends, lost, duplicated, phantom, replayMismatch, contradicted int
}

func (l *sendLoad) check(t *testing.T, pool *pgxpool.Pool) verdict {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT body_md, message_id::text FROM messages WHERE body_md LIKE 'load %'`)
	if err != nil {
		t.Fatal(err)
	}
	stored := map[string][]string{}
	ids := map[string]bool{}
	for rows.Next() {
		var body, id string
		if err := rows.Scan(&body, &id); err != nil {
			t.Fatal(err)
		}
		stored[body] = append(stored[body], id)
		ids[id] = true
	}
	rows.Close()
	v := verdict{sends: l.clients * l.perClient, replayMismatch: l.replays}
	for c := range l.clients {
		for i := range l.perClient {
			body := fmt.Sprintf("load c%d m%d", c, i)
			switch got := stored[body]; {
			case len(got) == 0 && l.final[body] == "sent":
				v.lost++
			case len(got) > 1:
				v.duplicated++
			case len(got) == 1 && l.final[body] != "sent":
				// A definite error answer (STORAGE_FAILURE, 4xx) for a write that persisted.
				v.contradicted++
				t.Logf("%s: answers %v, but it is stored", body, l.attempts[body])
			}
			if l.final[body] != "sent" {
				t.Logf("%s: ended with %q after %v", body, l.final[body], l.attempts[body])
			}
		}
	}
	for _, id := range l.told {
		if !ids[id] {
			v.phantom++
		}
	}
	return v
}

func (l *sendLoad) codeSummary() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var parts []string
	for k, n := range l.codes {
		parts = append(parts, fmt.Sprintf("%s ×%d", k, n))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

// loadWorld creates box alpha with `clients` senders and one recipient through e.
func loadWorld(e *testenv.Env, clients int) (keys []string, recipient string) {
	e.Box("alpha")
	r := e.NewAgent("alpha", "inbox", nil)
	for c := range clients {
		a := e.NewAgent("alpha", fmt.Sprint("sender", c), nil)
		a.Prime()
		keys = append(keys, a.Key)
	}
	return keys, r.ID.String()
}

// summary rows of the reliability runs, written to RELIABILITY_SUMMARY (make reliability).
var summary struct {
	mu   sync.Mutex
	rows []string
}

func report(t *testing.T, row string) {
	t.Log(row)
	summary.mu.Lock()
	summary.rows = append(summary.rows, row)
	rows := append([]string(nil), summary.rows...)
	summary.mu.Unlock()
	if path := os.Getenv("RELIABILITY_SUMMARY"); path != "" {
		head := "| run | sends | lost | duplicated | 2xx naming no message | replay mismatch | answers contradicting the DB | recovery | answers seen |\n|---|---|---|---|---|---|---|---|---|\n"
		os.WriteFile(path, []byte(head+strings.Join(rows, "\n")+"\n"), 0o644) //nolint:errcheck
	}
}
