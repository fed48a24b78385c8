package bench

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// observed runs p, sampling the server's RSS when rss is set, and returns per-op
// diagnostics from database and pool counters. The counters are read when the window
// opens and when it closes, both under load: PostgreSQL backends publish their statistics
// at most once a second while busy (and only after up to 10 s once idle), so snapshots
// taken under steady load lag by the same amount at both ends and the difference is the
// window's, within about a second of activity.
func (h *harness) observed(ctx context.Context, p phase, rss bool, op opFunc) (*phaseResult, float64, map[string]float64, error) {
	// Statistics as autovacuum would have them on a database in use: without them, plans
	// cached while the tables were nearly empty (foreign-key checks among them) scan whole
	// tables and the phase measures a cold planner, not the product.
	if h.pool != nil {
		if _, err := h.pool.Exec(ctx, "ANALYZE"); err != nil {
			return nil, 0, nil, fmt.Errorf("bench: ANALYZE before the phase: %w", err)
		}
	}
	var before, after counters
	var snapped sync.WaitGroup
	snapped.Add(2)
	measure := p.OnMeasure
	p.OnMeasure = func(ctx context.Context, w window) {
		snapCtx := context.WithoutCancel(ctx)
		before = h.snapshot(snapCtx)
		snapped.Done()
		time.AfterFunc(time.Until(w.to), func() { after = h.snapshot(snapCtx); snapped.Done() })
		if measure != nil {
			measure(ctx, w)
		}
	}
	var sampler *rssSampler
	if rss {
		sampler = startRSS(h.serverPID)
	}
	res, err := p.run(ctx, h.prog, op)
	peak := sampler.Stop()
	if err != nil {
		return res, peak, nil, err
	}
	snapped.Wait()
	res.DB = dbProfile(before, after, res.Ops)
	return res, peak, perOp(before, after, res.Ops), nil
}

// w0 is the physical floor of one write transaction here: single-row INSERT commits into
// a scratch table of the same database, from as many connections as W1 has clients.
func (h *harness) w0(ctx context.Context) []Result {
	base := Result{ID: "W0", Workload: "W0 raw pgx INSERT (baseline)", Unit: "commits/s"}
	if h.pool == nil {
		base.Status, base.Note = StatusNotAvailable, "not available: no database URL"
		return []Result{base}
	}
	table := pgx.Identifier{"bench_w0_" + h.runID}.Sanitize()
	if _, err := h.pool.Exec(ctx, "CREATE TABLE "+table+" (id bigserial PRIMARY KEY, client int NOT NULL, body text NOT NULL, created_at timestamptz NOT NULL)"); err != nil {
		return []Result{failed(base.ID, base.Workload, fmt.Errorf("creating the scratch table: %w", err))}
	}
	defer h.pool.Exec(context.WithoutCancel(ctx), "DROP TABLE IF EXISTS "+table) //nolint:errcheck
	body := strings.Repeat("x", 1024)                                            // the size of a W1 message body
	insert := "INSERT INTO " + table + " (client, body, created_at) VALUES ($1, $2, $3)"
	// Open every connection before measuring.
	if err := parallel(ctx, h.cfg.Clients, h.cfg.Clients, func(ctx context.Context, i int) error {
		_, err := h.pool.Exec(ctx, "SELECT 1")
		return err
	}); err != nil {
		return []Result{failed(base.ID, base.Workload, err)}
	}
	p := phase{Label: base.Workload, Clients: h.cfg.Clients, Warmup: h.cfg.Warmup, Duration: h.cfg.Duration}
	res, _, extra, err := h.observed(ctx, p, false, func(ctx context.Context, c int) (int, error) {
		_, err := h.pool.Exec(ctx, insert, c, body, time.Now())
		return 0, err
	})
	if err != nil {
		return []Result{failed(base.ID, base.Workload, err)}
	}
	r := base.fromPhase(res, h.cfg.Clients)
	r.Extra = extra
	return []Result{r}
}
