// Command bench-river is the River side of the Agentbox benchmark's W4 (work distribution):
// producers enqueue one job per item with Insert, a no-op worker works it, and completions
// are counted through River's job-completed subscription. It lives in its own module so
// the product's go.mod never carries River; `agentbox bench` runs it as a subprocess and
// merges the JSON it prints on stdout.
//
//	bench-river -database-url postgres://… -producers 8 -duration 10s
//
// With -backlog N it measures a drain instead: N jobs are inserted (InsertMany) before the
// client starts, then its workers work until all N are completed; items/s is N over the
// time from Start to the last completion.
//
// River's tables go into their own schema (default river_bench), created and migrated at
// start and dropped at exit, so the database it shares with Agentbox is left as it was.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math"
	"os"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// itemArgs carries the enqueue time so completion latency is end to end.
type itemArgs struct {
	EnqueuedAtNanos int64 `json:"t"`
}

func (itemArgs) Kind() string { return "agentbox_bench_item" }

// noopWorker completes every job at once: the benchmark measures the queue, not the work.
type noopWorker struct {
	river.WorkerDefaults[itemArgs]
}

func (noopWorker) Work(context.Context, *river.Job[itemArgs]) error { return nil }

// result is what the harness merges into its report.
type result struct {
	Implementation string  `json:"implementation"`
	Version        string  `json:"version"`
	Producers      int     `json:"producers"`
	MaxWorkers     int     `json:"max_workers"`
	FetchCooldownS float64 `json:"fetch_cooldown_s"`
	DurationS      float64 `json:"duration_s"`
	Inserted       int64   `json:"inserted"`
	Completed      int64   `json:"completed"`
	ItemsPerS      float64 `json:"items_per_s"`
	InsertsPerS    float64 `json:"inserts_per_s"`
	P50Ms          float64 `json:"p50_ms"`
	P99Ms          float64 `json:"p99_ms"`
	InsertP50Ms    float64 `json:"insert_p50_ms"`
	InsertP99Ms    float64 `json:"insert_p99_ms"`
	Errors         int64   `json:"errors"`
	// Backlog is the drain's pre-inserted job count (0: the live mix with producers).
	Backlog int64 `json:"backlog,omitempty"`
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench-river:", err)
		os.Exit(1)
	}
}

func run() error {
	dbURL := flag.String("database-url", os.Getenv("AGENTBOX_BENCH_DATABASE_URL"), "PostgreSQL URL of the benchmark database")
	schema := flag.String("schema", "river_bench", "schema for River's tables (created, then dropped at exit)")
	producers := flag.Int("producers", 8, "concurrent producers, one Insert per item")
	duration := flag.Duration("duration", 10*time.Second, "measured duration")
	warmup := flag.Duration("warmup", time.Second, "unmeasured warm-up before the measurement")
	maxWorkers := flag.Int("max-workers", 100, "River MaxWorkers of the default queue")
	cooldown := flag.Duration("fetch-cooldown", time.Millisecond, "River FetchCooldown")
	backlog := flag.Int("backlog", 0, "drain mode: insert this many jobs first, then work them until none is left")
	drainTimeout := flag.Duration("drain-timeout", 5*time.Minute, "drain mode: give up after this long")
	flag.Parse()
	if *dbURL == "" {
		return errors.New("-database-url is required")
	}
	ctx := context.Background()

	cfg, err := pgxpool.ParseConfig(*dbURL)
	if err != nil {
		return fmt.Errorf("database URL: %w", err)
	}
	cfg.MaxConns = int32(*producers + 10)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+pgx.Identifier{*schema}.Sanitize()); err != nil {
		return fmt.Errorf("creating schema: %w", err)
	}
	defer pool.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+pgx.Identifier{*schema}.Sanitize()+" CASCADE") //nolint:errcheck

	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	driver := riverpgxv5.New(pool)
	migrator, err := rivermigrate.New(driver, &rivermigrate.Config{Schema: *schema, Logger: log})
	if err != nil {
		return err
	}
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return fmt.Errorf("river migrations: %w", err)
	}

	workers := river.NewWorkers()
	river.AddWorker(workers, &noopWorker{})
	client, err := river.NewClient(driver, &river.Config{
		Schema:        *schema,
		Logger:        log,
		Queues:        map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: *maxWorkers}},
		FetchCooldown: *cooldown,
		Workers:       workers,
	})
	if err != nil {
		return err
	}
	// A large buffer: a dropped event would undercount River.
	events, unsubscribe := client.SubscribeConfig(&river.SubscribeConfig{
		Kinds: []river.EventKind{river.EventKindJobCompleted}, ChanSize: 1 << 20})
	defer unsubscribe()
	if *backlog > 0 {
		return drain(ctx, client, events, *backlog, *drainTimeout, result{
			Implementation: "river", Version: riverVersion(), Producers: 0, MaxWorkers: *maxWorkers, FetchCooldownS: cooldown.Seconds()})
	}
	if err := client.Start(ctx); err != nil {
		return err
	}

	start := time.Now()
	measureFrom := start.Add(*warmup)
	measureTo := measureFrom.Add(*duration)

	var completed atomic.Int64
	var completionLat []time.Duration
	consumerDone := make(chan struct{})
	go func() {
		defer close(consumerDone)
		for ev := range events {
			now := time.Now()
			if now.Before(measureFrom) || now.After(measureTo) {
				continue
			}
			completed.Add(1)
			var a itemArgs
			if json.Unmarshal(ev.Job.EncodedArgs, &a) == nil && a.EnqueuedAtNanos > 0 {
				completionLat = append(completionLat, now.Sub(time.Unix(0, a.EnqueuedAtNanos)))
			}
		}
	}()

	var inserted, insertErrors atomic.Int64
	insertLat := make([][]time.Duration, *producers)
	var wg sync.WaitGroup
	for p := range *producers {
		wg.Go(func() {
			for {
				t0 := time.Now()
				if !t0.Before(measureTo) {
					return
				}
				_, err := client.Insert(ctx, itemArgs{EnqueuedAtNanos: t0.UnixNano()}, nil)
				t1 := time.Now()
				if err != nil {
					insertErrors.Add(1)
					continue
				}
				if !t0.Before(measureFrom) && !t1.After(measureTo) {
					inserted.Add(1)
					insertLat[p] = append(insertLat[p], t1.Sub(t0))
				}
			}
		})
	}
	wg.Wait()
	time.Sleep(time.Until(measureTo))
	stopCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := client.StopAndCancel(stopCtx); err != nil {
		log.Warn("stopping river", slog.Any("err", err))
	}
	unsubscribe()
	<-consumerDone

	allInserts := slices.Concat(insertLat...)
	d := duration.Seconds()
	res := result{
		Implementation: "river",
		Version:        riverVersion(),
		Producers:      *producers,
		MaxWorkers:     *maxWorkers,
		FetchCooldownS: cooldown.Seconds(),
		DurationS:      d,
		Inserted:       inserted.Load(),
		Completed:      completed.Load(),
		ItemsPerS:      float64(completed.Load()) / d,
		InsertsPerS:    float64(inserted.Load()) / d,
		P50Ms:          percentileMs(completionLat, 50),
		P99Ms:          percentileMs(completionLat, 99),
		InsertP50Ms:    percentileMs(allInserts, 50),
		InsertP99Ms:    percentileMs(allInserts, 99),
		Errors:         insertErrors.Load(),
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(res)
}

// drain inserts n jobs, starts the client and waits until all n are completed.
func drain(ctx context.Context, client *river.Client[pgx.Tx], events <-chan *river.Event, n int, timeout time.Duration, res result) error {
	const batch = 1000
	for done := 0; done < n; done += batch {
		params := make([]river.InsertManyParams, min(batch, n-done))
		now := time.Now().UnixNano()
		for i := range params {
			params[i] = river.InsertManyParams{Args: itemArgs{EnqueuedAtNanos: now}}
		}
		if _, err := client.InsertMany(ctx, params); err != nil {
			return fmt.Errorf("inserting the backlog: %w", err)
		}
	}
	start := time.Now()
	if err := client.Start(ctx); err != nil {
		return err
	}
	deadline := time.After(timeout)
	var completed int64
	last := start
	for completed < int64(n) {
		select {
		case ev, ok := <-events:
			if !ok {
				return errors.New("the completion subscription closed early")
			}
			if ev.Kind == river.EventKindJobCompleted {
				completed++
				last = time.Now()
			}
		case <-deadline:
			return fmt.Errorf("drain: %d of %d jobs completed within %s", completed, n, timeout)
		}
	}
	stopCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := client.StopAndCancel(stopCtx); err != nil {
		fmt.Fprintln(os.Stderr, "bench-river: stopping river:", err)
	}
	elapsed := last.Sub(start).Seconds()
	res.Backlog, res.Inserted, res.Completed, res.DurationS = int64(n), int64(n), completed, elapsed
	res.ItemsPerS = float64(completed) / elapsed
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(res)
}

// percentileMs is the nearest-rank percentile in milliseconds (0 without samples).
func percentileMs(samples []time.Duration, p float64) float64 {
	if len(samples) == 0 {
		return 0
	}
	slices.Sort(samples)
	rank := int(math.Ceil(p / 100 * float64(len(samples))))
	rank = min(max(rank, 1), len(samples))
	return float64(samples[rank-1]) / float64(time.Millisecond)
}

func riverVersion() string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, m := range info.Deps {
			if m.Path == "github.com/riverqueue/river" {
				return m.Version
			}
		}
	}
	return "unknown"
}
