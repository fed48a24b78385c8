package store

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentbox/agentbox/internal/faultproxy"
	"github.com/agentbox/agentbox/internal/testdb"
)

var sweepNow = time.Date(2026, 6, 3, 0, 0, 0, 0, time.UTC)

// openStore opens a store on url, closed when the test ends.
func openStore(t *testing.T, url string) *Store {
	t.Helper()
	s, err := Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// seedIdempotency creates a box with `expired` records that expire at or before sweepNow
// and `live` records that expire after it, all of one agent.
func seedIdempotency(t *testing.T, pool *pgxpool.Pool, expired, live int) uuid.UUID {
	t.Helper()
	box := uuid.New()
	if _, err := pool.Exec(context.Background(), `
WITH b AS (INSERT INTO boxes (box_id, box_key, created_at) VALUES ($1::uuid, $1::uuid::text, '2026-01-01') RETURNING box_id)
INSERT INTO idempotency_records (box_id, agent_id, tool, idem_key, request_hash, response, created_at, expires_at)
SELECT b.box_id, b.box_id, 'message_send', CASE WHEN g <= $2::int THEN 'expired-' ELSE 'live-' END || g, '\x00', '\x00', '2026-06-01',
       -- the newest expired record expires exactly at sweepNow; the oldest live one a microsecond after
       CASE WHEN g <= $2 THEN $4::timestamptz - (($2 - g) * interval '1 s') ELSE $4::timestamptz + ((g - $2 - 1) * interval '1 s') + interval '1 us' END
FROM b, generate_series(1, $2::int + $3::int) g`, box, expired, live, sweepNow); err != nil {
		t.Fatal(err)
	}
	return box
}

// recordsLeft counts a box's records, and those among them with an "expired-" key.
func recordsLeft(t *testing.T, pool *pgxpool.Pool, box uuid.UUID) (all, expired int) {
	t.Helper()
	if err := pool.QueryRow(context.Background(), `SELECT count(*), count(*) FILTER (WHERE idem_key LIKE 'expired-%')
		FROM idempotency_records WHERE box_id = $1`, box).Scan(&all, &expired); err != nil {
		t.Fatal(err)
	}
	return all, expired
}

// A sweep deletes every box's expired records (expires_at <= now) in batches, and only them.
func TestSweepExpiredIdempotencyDeletesOnlyExpired(t *testing.T) {
	t.Parallel()
	s := openStore(t, testdb.New(t))
	s.expiry.boxPage = 2 // three boxes: two pages
	pool := s.Pool()
	big := seedIdempotency(t, pool, 2*expiryBatchRows+500, 30) // three batches, the last one short
	small := seedIdempotency(t, pool, 7, 5)
	none := seedIdempotency(t, pool, 0, 4)
	ctx := context.Background()

	deleted, err := s.SweepExpiredIdempotency(ctx, sweepNow)
	if err != nil {
		t.Fatal(err)
	}
	if want := int64(2*expiryBatchRows + 500 + 7); deleted != want {
		t.Errorf("deleted %d records, want %d", deleted, want)
	}
	for box, live := range map[uuid.UUID]int{big: 30, small: 5, none: 4} {
		if all, expired := recordsLeft(t, pool, box); all != live || expired != 0 {
			t.Errorf("box %s keeps %d records (%d expired), want the %d live ones", box, all, expired, live)
		}
	}
	if st := s.IdempotencyExpiryStats(); st.Runs != 1 || st.Failures != 0 || st.Deleted != deleted || !st.LastSuccess.Equal(sweepNow) {
		t.Errorf("stats after one sweep: %+v", st)
	}
	// Half a second later, each box's oldest live record (a microsecond after sweepNow) has expired.
	later := sweepNow.Add(time.Second / 2)
	if n, err := s.SweepExpiredIdempotency(ctx, later); err != nil || n != 3 {
		t.Fatalf("second sweep: %d, %v; want the 3 records expired since", n, err)
	}
	if st := s.IdempotencyExpiryStats(); st.Runs != 2 || st.Deleted != deleted+3 || !st.LastSuccess.Equal(later) {
		t.Errorf("stats after two sweeps: %+v", st)
	}
}

// Sweepers of several server processes (stores) running at once each delete a record at most
// once, never fail, and together delete every expired record.
func TestConcurrentSweepersDeleteEachRecordOnce(t *testing.T) {
	t.Parallel()
	url := testdb.New(t)
	stores := []*Store{openStore(t, url), openStore(t, url)}
	const boxes, expired, live = 4, 1500, 20
	var ids []uuid.UUID
	for range boxes {
		ids = append(ids, seedIdempotency(t, stores[0].Pool(), expired, live))
	}
	const perStore = 3
	var wg sync.WaitGroup
	start := make(chan struct{})
	counts := make([]int64, len(stores)*perStore)
	errs := make([]error, len(counts))
	for i := range counts {
		s := stores[i/perStore]
		s.expiry.batch = 50 // many short statements, so the sweepers interleave
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			counts[i], errs[i] = s.SweepExpiredIdempotency(context.Background(), sweepNow)
		}()
	}
	close(start)
	wg.Wait()
	var total int64
	for i := range counts {
		if errs[i] != nil {
			t.Errorf("sweeper %d: %v", i, errs[i])
		}
		total += counts[i]
	}
	t.Logf("records deleted by each sweeper: %v", counts)
	if total != boxes*expired {
		t.Errorf("the sweepers deleted %d records in all (%v), want each of the %d expired ones once", total, counts, boxes*expired)
	}
	if a, b := stores[0].IdempotencyExpiryStats(), stores[1].IdempotencyExpiryStats(); a.Deleted+b.Deleted != total || a.Runs != perStore || b.Runs != perStore || a.Failures+b.Failures != 0 {
		t.Errorf("stats: %+v and %+v", a, b)
	}
	for _, box := range ids {
		if all, left := recordsLeft(t, stores[0].Pool(), box); all != live || left != 0 {
			t.Errorf("box %s keeps %d records (%d expired)", box, all, left)
		}
	}
}

// logRecorder keeps the messages logged through it.
type logRecorder struct {
	mu   sync.Mutex
	msgs []string
}

func (l *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (l *logRecorder) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	line := r.Level.String() + " " + r.Message
	r.Attrs(func(a slog.Attr) bool {
		line += " " + a.String()
		return true
	})
	l.msgs = append(l.msgs, line)
	return nil
}
func (l *logRecorder) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logRecorder) WithGroup(string) slog.Handler      { return l }
func (l *logRecorder) lines() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.msgs...)
}

// waitUntil polls cond until it holds or the deadline passes.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// The running sweeper logs an outage once when it begins and once when it ends, however many
// sweeps fail in between, and never a statement or a value.
func TestIdempotencyExpiryLogsOutageOnce(t *testing.T) {
	t.Parallel()
	url := testdb.New(t)
	proxy, viaURL, err := faultproxy.NewFor(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Close)
	s := openStore(t, viaURL)
	s.SetCallTimeout(2 * time.Second)
	box := seedIdempotency(t, openStore(t, url).Pool(), 3, 1)
	rec := &logRecorder{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.KeepIdempotencyExpiry(ctx, 5*time.Millisecond, func() time.Time { return sweepNow }, slog.New(rec))
	}()
	defer func() {
		cancel()
		<-done
	}()
	succeeded := func() int64 { st := s.IdempotencyExpiryStats(); return st.Runs - st.Failures }
	waitUntil(t, "a first sweep", func() bool { return succeeded() >= 1 })
	if all, _ := recordsLeft(t, s.Pool(), box); all != 1 {
		t.Fatalf("the running sweeper left %d records, want the live one", all)
	}

	proxy.Refuse(true)
	proxy.Cut()
	failures := s.IdempotencyExpiryStats().Failures
	waitUntil(t, "several failed sweeps", func() bool { return s.IdempotencyExpiryStats().Failures >= failures+3 })
	before := succeeded()
	proxy.Refuse(false)
	waitUntil(t, "a sweep that works after the outage", func() bool { return succeeded() > before })
	cancel()
	<-done

	var warned, recovered int
	for _, l := range rec.lines() {
		switch {
		case strings.HasPrefix(l, "WARN deleting expired idempotency records failed"):
			warned++
			if !strings.Contains(l, "cause=") || strings.Contains(strings.ToLower(l), "select") || strings.Contains(l, box.String()) {
				t.Errorf("the warning must name the cause, never the statement or a value: %s", l)
			}
		case strings.HasPrefix(l, "INFO deleting expired idempotency records works again"):
			recovered++
		default:
			t.Errorf("unexpected log line: %s", l)
		}
	}
	if warned != 1 || recovered != 1 {
		t.Errorf("logged the outage %d times and the recovery %d times, want once each:\n%s", warned, recovered, strings.Join(rec.lines(), "\n"))
	}
}

// A sweep never waits for a record another transaction holds (a call replacing it, another
// sweeper): it skips it, and a later sweep deletes it.
func TestSweepSkipsLockedRecords(t *testing.T) {
	t.Parallel()
	s := openStore(t, testdb.New(t))
	box := seedIdempotency(t, s.Pool(), 5, 1)
	ctx := context.Background()
	holder, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Rollback(ctx) //nolint:errcheck
	if _, err := holder.Exec(ctx, `SELECT 1 FROM idempotency_records WHERE box_id = $1 AND idem_key = 'expired-3' FOR UPDATE`, box); err != nil {
		t.Fatal(err)
	}
	bounded, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if n, err := s.SweepExpiredIdempotency(bounded, sweepNow); err != nil || n != 4 {
		t.Fatalf("sweep beside a held record: %d, %v; want the 4 others", n, err)
	}
	if err := holder.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if n, err := s.SweepExpiredIdempotency(ctx, sweepNow); err != nil || n != 1 {
		t.Fatalf("sweep once it is released: %d, %v; want it", n, err)
	}
	if all, expired := recordsLeft(t, s.Pool(), box); all != 1 || expired != 0 {
		t.Errorf("left %d records (%d expired)", all, expired)
	}
}
