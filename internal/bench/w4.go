package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// w4 measures work distribution two ways, each against River measured the same way in the
// same run:
//   - drain: a backlog of W4Backlog items is written first (SQL seeding for Agentbox,
//     InsertMany for River), then W4Sessions sessions of one worker agent claim + ACK
//     until none is left (River: its workers work until the last job completes); items/s
//     is the backlog over the time to empty it;
//   - live: W4Producers agents send DMs to the worker while its sessions (Agentbox-Session
//     s1..sN) drain them with inbox_claim + inbox_ack. An item counts when its ACK returns
//     inside the window; its latency runs from the send to that ACK. River does the same
//     flow (Insert → no-op → complete). The live mix runs twice: with W4Sessions sessions,
//     and with one session, as many claim loops as River's one client has fetch loops (its
//     100 workers are fed by one producer loop), so the report shows how much of the gap
//     is the polling of the sessions and how much the cost of a send.
func (h *harness) w4(ctx context.Context) []Result {
	drain := h.w4Drain(ctx)
	riverDrain := h.w4River(ctx, true)
	out := []Result{drain, riverDrain}
	base := Result{ID: "W4", Workload: "W4 live (producers + claim + ack)", Unit: "items/s", API: true}
	out = append(out, h.w4Agentbox(ctx, base, h.cfg.W4Sessions))
	if h.cfg.W4Sessions != 1 {
		one := Result{ID: "W4.one_session", Workload: "W4 live, one session (one claim loop, as River's one client)", Unit: "items/s", API: true}
		out = append(out, h.w4Agentbox(ctx, one, 1))
	}
	return append(out, h.w4River(ctx, false))
}

// w4Drain empties a pre-filled backlog with W4Sessions sessions claiming and ACKing.
func (h *harness) w4Drain(ctx context.Context) Result {
	base := Result{ID: "W4.drain", Workload: fmt.Sprintf("W4 drain (%s backlog, claim + ack until empty)", countLabel(h.cfg.W4Backlog)), Unit: "items/s", API: true}
	fail := func(err error) Result { return failed(base.ID, base.Workload, err) }
	if h.pool == nil {
		return fail(notAvailable("no database URL to seed the backlog"))
	}
	box := "bench-w4d-" + h.runID
	if err := h.createBox(ctx, box); err != nil {
		return fail(err)
	}
	if err := h.c.admin(ctx, h.adminToken, "admin_settings_update", "PATCH", "/boxes/"+box+"/settings",
		map[string]any{"settings": map[string]any{"channel_message_cap": 2 * h.cfg.W4Backlog}}, nil); err != nil {
		return fail(err)
	}
	agents, err := h.createAgents(ctx, box, "w4d", 2)
	if err != nil {
		return fail(err)
	}
	sender, worker := agents[0], agents[1]
	sessions, err := h.primeSessions(ctx, worker, "d", h.cfg.W4Sessions)
	if err != nil {
		return fail(err)
	}
	roomID, err := h.createRoom(ctx, "w4-drain", sender, []*agent{worker})
	if err != nil {
		return fail(err)
	}
	h.prog.logf("bench: W4 drain setup: %d unread items for 1 worker agent with %d sessions", h.cfg.W4Backlog, h.cfg.W4Sessions)
	sd := &seeder{pool: h.pool, box: box, room: roomID, sender: sender.ID, reader: worker.ID, prog: h.prog}
	if err := sd.init(ctx); err != nil {
		return fail(err)
	}
	if err := sd.grow(ctx, h.cfg.W4Backlog, h.cfg.W4Backlog); err != nil { // grow ANALYZEs after seeding
		return fail(fmt.Errorf("seeding the backlog: %w", err))
	}

	ctx, cancel := context.WithTimeout(ctx, w4DrainTimeout)
	defer cancel()
	sampler := startRSS(h.serverPID)
	snapCtx := context.WithoutCancel(ctx)
	before := h.snapshot(snapCtx)
	var items, requests, errs atomic.Int64
	var elog errorLog
	var stop fatal
	rounds := make([][]time.Duration, len(sessions))
	done := h.prog.untilDone(base.Workload)
	start := time.Now()
	// With --pprof: a server profile of the drain's first --duration (the drain has no
	// fixed window; a shorter drain leaves idle time in it, which adds no samples).
	onProfile, waitProfile := h.profileDuring("w4.drain.cpu.pprof")
	if onProfile != nil {
		go onProfile(ctx, window{from: start, to: start.Add(h.cfg.Duration)})
	}
	var lastMu sync.Mutex
	last := start
	var wg sync.WaitGroup
	for s, sess := range sessions {
		wg.Go(func() {
			consecutive := 0
			for n := 0; ctx.Err() == nil; n++ {
				t0 := time.Now()
				var claimed struct {
					Items []inboxItem `json:"items"`
				}
				key := fmt.Sprintf("d-%s-%d-%d", h.runID, s, n)
				err := h.c.call(ctx, sess, "inbox_claim", "POST", "/inbox/claim",
					map[string]any{"limit": h.cfg.W4ClaimLimit, "lease_seconds": 300, "idempotency_key": "c-" + key}, &claimed)
				if err == nil {
					requests.Add(1)
					if len(claimed.Items) == 0 {
						return // nothing unleased is left; what others hold, they ACK
					}
					seqs := make([]string, len(claimed.Items))
					for i, it := range claimed.Items {
						seqs[i] = it.InboxSeq
					}
					ack, _ := json.Marshal(map[string]any{"inbox_seqs": seqs, "idempotency_key": "a-" + key})
					err = h.c.call(ctx, sess, "inbox_ack", "POST", "/inbox/ack", ack, nil)
					if err == nil {
						now := time.Now()
						requests.Add(1)
						items.Add(int64(len(claimed.Items)))
						rounds[s] = append(rounds[s], now.Sub(t0))
						lastMu.Lock()
						if now.After(last) {
							last = now
						}
						lastMu.Unlock()
						consecutive = 0
						continue
					}
				}
				if ctx.Err() != nil {
					return
				}
				if _, ok := errorsAsNotAvailable(err); ok {
					stop.set(err, cancel)
					return
				}
				errs.Add(1)
				elog.add(err)
				if consecutive++; consecutive >= maxConsecutiveErrors {
					stop.set(fmt.Errorf("session %d failed %d times in a row; last error: %w", s, consecutive, err), cancel)
					return
				}
			}
		})
	}
	wg.Wait()
	peak := sampler.Stop()
	waitProfile()
	if stop.err != nil {
		done("stopped")
		return fail(stop.err)
	}
	after := h.snapshot(snapCtx)
	elapsed := last.Sub(start)
	ph := &phaseResult{Ops: items.Load(), Requests: requests.Load(), Errors: errs.Load(), Elapsed: elapsed,
		Latency: summarize(merge(rounds)), FirstErrors: elog.list(), DB: dbProfile(before, after, items.Load())}
	done(fmt.Sprintf("%.0f items/s  (%d items in %s, claim+ACK round p50 %.2f ms)", ph.perSecond(), ph.Ops, elapsed.Round(time.Millisecond), ms(ph.Latency.P50)))
	out := base.fromPhase(ph, h.cfg.W4Sessions)
	if ph.Ops != int64(h.cfg.W4Backlog) {
		out.Status = StatusFailed
		out.Note = fmt.Sprintf("%d of %d backlog items ACKed within %s", ph.Ops, h.cfg.W4Backlog, w4DrainTimeout)
	}
	out.RSSPeakMiB = peak
	out.Extra = perOp(before, after, ph.Ops)
	if out.Extra == nil {
		out.Extra = map[string]float64{}
	}
	out.Extra["backlog"] = float64(h.cfg.W4Backlog)
	out.Extra["drain_s"] = elapsed.Seconds()
	out.Note = strings.TrimPrefix(out.Note+"; latency is one claim+ACK round", "; ")
	return out
}

// w4DrainTimeout bounds a drain (Agentbox's and River's).
const w4DrainTimeout = 5 * time.Minute

func (h *harness) w4Agentbox(ctx context.Context, base Result, nSessions int) Result {
	fail := func(err error) Result { return failed(base.ID, base.Workload, err) }
	box := fmt.Sprintf("bench-w4-%d-%s", nSessions, h.runID)
	if err := h.createBox(ctx, box); err != nil {
		return fail(err)
	}
	h.prog.logf("bench: W4 setup: %d producers, 1 worker agent with %d sessions", h.cfg.W4Producers, nSessions)
	agents, err := h.createAgents(ctx, box, "w4", h.cfg.W4Producers+1)
	if err != nil {
		return fail(err)
	}
	worker, producers := agents[0], agents[1:]
	sessions, err := h.primeSessions(ctx, worker, "s", nSessions)
	if err != nil {
		return fail(err)
	}
	// Fail fast (and report not available) before loading anything.
	probeKey := "probe-" + h.runID
	if err := h.c.call(ctx, sessions[0], "inbox_claim", "POST", "/inbox/claim",
		map[string]any{"limit": 1, "idempotency_key": probeKey}, nil); err != nil {
		if _, ok := errorsAsNotAvailable(err); ok {
			return fail(err)
		}
	}

	sampler := startRSS(h.serverPID)
	w := newWindow(h.cfg.Warmup, h.cfg.Duration)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var stop fatal
	var sent, completed, totalSends, totalItems, requests, errs atomic.Int64
	lat := make([][]time.Duration, len(sessions))
	var elog errorLog
	onMeasure, waitProfile := h.profileDuring("w4.cpu.pprof")
	// Counters are read under load at both ends of the window (see observed).
	var before, after counters
	var snapped sync.WaitGroup
	snapped.Add(2)
	snapCtx := context.WithoutCancel(ctx)
	open := time.AfterFunc(time.Until(w.from), func() {
		before = h.snapshot(snapCtx)
		snapped.Done()
		if onMeasure != nil {
			onMeasure(ctx, w)
		}
	})
	defer open.Stop()
	closing := time.AfterFunc(time.Until(w.to), func() { after = h.snapshot(snapCtx); snapped.Done() })
	defer closing.Stop()
	abandon := time.AfterFunc(time.Until(w.to)+abandonAfter, cancel) // see phase.run
	defer abandon.Stop()
	count := func(err error) {
		if _, ok := errorsAsNotAvailable(err); ok {
			stop.set(err, cancel)
			return
		}
		if ctx.Err() == nil {
			errs.Add(1)
			elog.add(err)
		}
	}
	done := h.prog.start(base.Workload, w, completed.Load)
	var wg sync.WaitGroup
	for p, a := range producers {
		wg.Go(func() {
			for n := 0; ctx.Err() == nil && !w.over(time.Now()); n++ {
				t0 := time.Now()
				tag := fmt.Sprintf("w4 t=%d p%d n%d %s", t0.UnixNano(), p, n, h.runID)
				err := h.c.call(ctx, a, "message_send", "POST", "/messages", sendBody("dm", worker.ID, tag, tag), nil)
				if err != nil {
					count(err)
					continue
				}
				totalSends.Add(1)
				if w.in(time.Now()) {
					sent.Add(1)
					requests.Add(1)
				}
			}
		})
	}
	for s, sess := range sessions {
		wg.Go(func() {
			for n := 0; ctx.Err() == nil && !w.over(time.Now()); n++ {
				var claimed struct {
					Items []inboxItem `json:"items"`
				}
				key := fmt.Sprintf("%s-%d-%d", h.runID, s, n)
				if err := h.c.call(ctx, sess, "inbox_claim", "POST", "/inbox/claim",
					map[string]any{"limit": h.cfg.W4ClaimLimit, "lease_seconds": 300, "idempotency_key": "c-" + key}, &claimed); err != nil {
					count(err)
					continue
				}
				if w.in(time.Now()) {
					requests.Add(1)
				}
				if len(claimed.Items) == 0 {
					// At most one empty claim a millisecond per session, as River's FetchCooldown
					// (1 ms here) bounds its fetches. River's idle producer fetches only when an
					// insert notifies it (LISTEN/NOTIFY; FetchPollInterval, 1 s, as a fallback);
					// an Agentbox worker has nothing to wait on (SPEC §13.3: polling only), so its
					// empty claims, each a mutation with an idempotency record, are part of the
					// live mix's cost.
					time.Sleep(time.Millisecond)
					continue
				}
				seqs := make([]string, len(claimed.Items))
				for i, it := range claimed.Items {
					seqs[i] = it.InboxSeq
				}
				ack, _ := json.Marshal(map[string]any{"inbox_seqs": seqs, "idempotency_key": "a-" + key})
				if err := h.c.call(ctx, sess, "inbox_ack", "POST", "/inbox/ack", ack, nil); err != nil {
					count(err)
					continue
				}
				now := time.Now()
				totalItems.Add(int64(len(claimed.Items)))
				if !w.in(now) {
					continue
				}
				requests.Add(1)
				completed.Add(int64(len(claimed.Items)))
				for _, it := range claimed.Items {
					if t, ok := sentAt(it.Message.BodyMD); ok {
						lat[s] = append(lat[s], now.Sub(t))
					}
				}
			}
		})
	}
	wg.Wait()
	peak := sampler.Stop()
	waitProfile()
	if stop.err != nil {
		done("stopped")
		return fail(stop.err)
	}
	snapped.Wait()
	extra := perOp(before, after, completed.Load())
	if extra == nil {
		extra = map[string]float64{}
	}
	extra["sends_per_s"] = perSecond(sent.Load(), h.cfg.Duration)
	extra["producers"] = float64(h.cfg.W4Producers)
	extra["sessions"] = float64(nSessions)
	extra["backlog_at_end"] = float64(totalSends.Load() - totalItems.Load())
	ph := &phaseResult{Ops: completed.Load(), Requests: requests.Load(), Errors: errs.Load(), Elapsed: h.cfg.Duration,
		Latency: summarize(merge(lat)), FirstErrors: elog.list(), DB: dbProfile(before, after, completed.Load())}
	done(fmt.Sprintf("%.0f items/s  end-to-end p50 %.2f ms  p99 %.2f ms  errors %d",
		ph.perSecond(), ms(ph.Latency.P50), ms(ph.Latency.P99), ph.Errors))
	out := base.fromPhase(ph, h.cfg.W4Producers+nSessions)
	out.RSSPeakMiB = peak
	out.Extra = extra
	return out
}

// sentAt reads the send time a W4 body carries ("w4 t=<unix nanos> …").
func sentAt(body string) (time.Time, bool) {
	rest, ok := strings.CutPrefix(body, "w4 t=")
	if !ok {
		return time.Time{}, false
	}
	num, _, _ := strings.Cut(rest, " ")
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil {
		return time.Time{}, false
	}
	return time.Unix(0, n), true
}

// riverResult is what tools/bench-river prints.
type riverResult struct {
	Version     string  `json:"version"`
	Producers   int     `json:"producers"`
	MaxWorkers  int     `json:"max_workers"`
	Completed   int64   `json:"completed"`
	Inserted    int64   `json:"inserted"`
	ItemsPerS   float64 `json:"items_per_s"`
	InsertsPerS float64 `json:"inserts_per_s"`
	P50Ms       float64 `json:"p50_ms"`
	P99Ms       float64 `json:"p99_ms"`
	DurationS   float64 `json:"duration_s"`
	Errors      int64   `json:"errors"`
	Backlog     int64   `json:"backlog"`
}

// w4River runs the River baseline subprocess on the benchmark database: the live mix, or
// with drain a pre-inserted backlog of W4Backlog jobs worked until empty.
func (h *harness) w4River(ctx context.Context, drain bool) Result {
	r := Result{ID: "W4.river", Workload: "W4 River live (Insert → no-op → complete)", Unit: "items/s"}
	if drain {
		r = Result{ID: "W4.river.drain", Workload: fmt.Sprintf("W4 River drain (%s backlog, work until empty)", countLabel(h.cfg.W4Backlog)), Unit: "items/s"}
	}
	switch {
	case h.dbURL == "":
		r.Status, r.Note = StatusNotAvailable, "not available: no database URL"
		return r
	case h.cfg.RiverBin == "":
		r.Status, r.Note = StatusNotAvailable, "not available: no bench-river binary (make bench builds bin/bench-river from tools/bench-river)"
		return r
	}
	if _, err := os.Stat(h.cfg.RiverBin); err != nil {
		r.Status, r.Note = StatusNotAvailable, "not available: "+err.Error()
		return r
	}
	schema := "river_bench_" + h.runID
	args := []string{"-database-url", h.dbURL, "-schema", schema, "-producers", strconv.Itoa(h.cfg.W4Producers),
		"-duration", h.cfg.Duration.String(), "-warmup", h.cfg.Warmup.String(), "-max-workers", "100", "-fetch-cooldown", "1ms"}
	if drain {
		schema += "_drain"
		args = []string{"-database-url", h.dbURL, "-schema", schema, "-backlog", strconv.Itoa(h.cfg.W4Backlog),
			"-drain-timeout", w4DrainTimeout.String(), "-max-workers", "100", "-fetch-cooldown", "1ms"}
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, h.cfg.RiverBin, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	var done func(string)
	if drain {
		done = h.prog.untilDone(r.Workload)
	} else {
		done = h.prog.start(r.Workload, newWindow(h.cfg.Warmup, h.cfg.Duration), func() int64 { return 0 })
	}
	if err := cmd.Run(); err != nil {
		done("failed")
		return failed(r.ID, r.Workload, fmt.Errorf("bench-river: %v: %s", err, strings.TrimSpace(stderr.String())))
	}
	var rr riverResult
	if err := json.Unmarshal(stdout.Bytes(), &rr); err != nil {
		done("failed")
		return failed(r.ID, r.Workload, fmt.Errorf("bench-river printed no result: %v", err))
	}
	r.Status = StatusOK
	r.Throughput, r.Ops, r.Errors = rr.ItemsPerS, rr.Completed, rr.Errors
	r.Clients, r.DurationS = rr.Producers, rr.DurationS
	if drain {
		done(fmt.Sprintf("%.0f items/s  (%d jobs in %.1fs)", rr.ItemsPerS, rr.Completed, rr.DurationS))
		r.Clients = rr.MaxWorkers
		r.Note = fmt.Sprintf("River %s, MaxWorkers %d, FetchCooldown 1ms; throughput only (no per-round latency)", rr.Version, rr.MaxWorkers)
		r.Extra = map[string]float64{"backlog": float64(rr.Backlog), "drain_s": rr.DurationS}
		return r
	}
	done(fmt.Sprintf("%.0f items/s  end-to-end p50 %.2f ms  p99 %.2f ms", rr.ItemsPerS, rr.P50Ms, rr.P99Ms))
	r.P50Ms, r.P99Ms = rr.P50Ms, rr.P99Ms
	r.Note = fmt.Sprintf("River %s, %d producers, MaxWorkers %d, FetchCooldown 1ms", rr.Version, rr.Producers, rr.MaxWorkers)
	r.Extra = map[string]float64{"inserts_per_s": rr.InsertsPerS}
	return r
}
