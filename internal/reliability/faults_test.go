package reliability

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentbox/agentbox/internal/pglocal"
	"github.com/agentbox/agentbox/internal/testdb"
)

// kill -9 of the server under load: 8 clients send unique DMs and retry uncertain answers
// with the same key; the server is killed with SIGKILL several times and restarted on the
// same port. Nothing is lost, nothing duplicated, no 2xx names a message that does not
// exist, and every replay names the original message.
func TestKill9UnderLoad(t *testing.T) {
	t.Parallel()
	perClient, kills := 60, 2 // 480 sends in make test
	if full() {
		perClient, kills = 700, 5 // 5,600 sends
	}
	dbURL := testdb.New(t)
	p := startServer(t, dbURL)
	keys, recipient := loadWorld(p.env(t), 8)
	pool, err := pgxpool.New(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)

	l := newSendLoad(p.url, keys, recipient, perClient)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	done := make(chan struct{})
	go func() { l.run(ctx); close(done) }()
	total := int64(8 * perClient)
	var recoveries []time.Duration
	for k := 1; k <= kills; k++ {
		// Kill at evenly spread points of the run, while sends are in flight.
		for l.ok.Load() < total*int64(k)/int64(kills+1) {
			select {
			case <-done:
				t.Fatal("the load ended before every kill")
			case <-time.After(2 * time.Millisecond):
			}
		}
		p.kill9()
		select { // drain a stale success signal
		case <-l.firstOK:
		default:
		}
		restart := time.Now()
		p.start()
		<-l.firstOK
		recoveries = append(recoveries, time.Since(restart))
	}
	<-done
	v := l.check(t, pool)
	report(t, fmt.Sprintf("| kill -9 ×%d (8 clients) | %d | %d | %d | %d | %d | %d | max %s to the first 2xx after restart | %s |",
		kills, v.sends, v.lost, v.duplicated, v.phantom, v.replayMismatch, v.contradicted, maxDur(recoveries).Round(time.Millisecond), l.codeSummary()))
	if v.lost+v.duplicated+v.phantom+v.replayMismatch+v.contradicted != 0 {
		t.Fatalf("kill -9: %+v", v)
	}
}

// PostgreSQL restarts (-m fast and -m immediate) under load, on a cluster of this test's own
// (never the shared server): no answer claims an outcome the database contradicts, and the
// service recovers once the database is back.
func TestPostgresRestartUnderLoad(t *testing.T) {
	t.Parallel()
	modes := []string{"fast", "immediate"}
	perClient := 60
	if full() {
		modes = []string{"fast", "immediate", "fast", "immediate", "immediate", "fast"}
		perClient = 400
	}
	dir, err := os.MkdirTemp("", "agentbox-pgrestart-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil { // the cluster user must traverse it
		t.Fatal(err)
	}
	ctx := context.Background()
	var logBuf strings.Builder
	var logMu sync.Mutex
	cluster, err := pglocal.Start(ctx, pglocal.Options{DataDir: filepath.Join(dir, "pg"), Log: writerFunc(func(b []byte) (int, error) {
		logMu.Lock()
		defer logMu.Unlock()
		if logBuf.Len() < 1<<20 {
			logBuf.Write(b)
		}
		return len(b), nil
	})})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cluster.Stop() }) //nolint:errcheck
	dbURL := cluster.URL("agentbox")
	p := startServer(t, dbURL)
	keys, recipient := loadWorld(p.env(t), 8)

	l := newSendLoad(p.url, keys, recipient, perClient)
	runCtx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	done := make(chan struct{})
	go func() { l.run(runCtx); close(done) }()
	total := int64(8 * perClient)
	var recoveries []string
	for k, mode := range modes {
		for l.ok.Load() < total*int64(k+1)/int64(len(modes)+1) {
			select {
			case <-done:
				t.Fatal("the load ended before every restart")
			case <-time.After(2 * time.Millisecond):
			}
		}
		if err := cluster.Restart(ctx, mode); err != nil {
			t.Fatalf("restart -m %s: %v\n%s", mode, err, logBuf.String())
		}
		select {
		case <-l.firstOK:
		default:
		}
		back := time.Now()
		<-l.firstOK
		recoveries = append(recoveries, fmt.Sprintf("%s %s", mode, time.Since(back).Round(time.Millisecond)))
	}
	<-done
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	v := l.check(t, pool)
	report(t, fmt.Sprintf("| PostgreSQL restart %s (8 clients) | %d | %d | %d | %d | %d | %d | first 2xx after the database is back: %s | %s |",
		strings.Join(modes, ","), v.sends, v.lost, v.duplicated, v.phantom, v.replayMismatch, v.contradicted, strings.Join(recoveries, "; "), l.codeSummary()))
	if v.lost+v.duplicated+v.phantom+v.replayMismatch+v.contradicted != 0 {
		t.Fatalf("PostgreSQL restarts: %+v", v)
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }

func maxDur(ds []time.Duration) time.Duration {
	var m time.Duration
	for _, d := range ds {
		m = max(m, d)
	}
	return m
}
