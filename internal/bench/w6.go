package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"
)

// W6 growth: do claim, ACK and inbox_list cost the same whatever an agent's history, and
// does a send cost the same in a box created a moment ago as in one holding a long history?
// One inbox per size is seeded with SQL (the W3 seeder) to w6Sizes rows of history, each
// returned to the measuring session (a receipt) and acknowledged, plus the same working set
// in every inbox: w6Leases rows leased live by another session of the reader and enough
// unread rows for every claim. One client measures inbox_list, claim and ACK on each inbox
// in turn, round by round (latency without queueing; noise shared alike); then message_send
// alternates between the largest inbox's room and a room of a box created after the last
// ANALYZE. Three more inboxes hold only unread rows, 300 to 30,000: inbox_list there reports
// an unread count that must not cost more with more rows.
var w6Sizes = []int{300, 3_000, 30_000}

const (
	w6Leases     = 1000
	w6ClaimLimit = 20
)

// w6Samples is the most claim+ACK rounds of each size, and what the inboxes are seeded for:
// those rounds stop after the phase duration (at least w6MinSamples rounds) or when these are
// done. A round of the three sizes took 27-92 ms on the 2-core reference machine, so a full
// run measures the phase duration on a slow day and 600 rounds (16 s) on a fast one: never
// under 10 s. The unread-only inboxes and the sends consume no seeded rows and always run for
// the phase duration.
func (h *harness) w6Samples() int {
	if h.cfg.Duration < 10*time.Second {
		return w6MinSamples
	}
	return 600
}

// w6MinSamples is the fewest measured rounds of each operation.
const w6MinSamples = 30

func (h *harness) w6(ctx context.Context) []Result {
	var lines []Result
	for _, op := range []string{"claim", "ack", "inbox_list"} {
		for _, n := range w6Sizes {
			lines = append(lines, Result{ID: fmt.Sprintf("W6.%s.%d", op, n), Workload: fmt.Sprintf("W6 %s @%s rows", op, countLabel(n)), Unit: "ms p50", API: false})
		}
	}
	for _, n := range w6Sizes {
		lines = append(lines, Result{ID: fmt.Sprintf("W6.inbox_list_unread.%d", n), Workload: fmt.Sprintf("W6 inbox_list @%s unread rows", countLabel(n)), Unit: "ms p50"})
	}
	lines = append(lines,
		Result{ID: "W6.send.new_box", Workload: "W6 send in a new box", Unit: "ms p50"},
		Result{ID: "W6.send.large_box", Workload: fmt.Sprintf("W6 send in a box of %s messages", countLabel(slices.Max(w6Sizes))), Unit: "ms p50"})
	failAll := func(err error) []Result { // the lines not measured yet
		for i := range lines {
			if lines[i].Status == "" {
				lines[i] = failed(lines[i].ID, lines[i].Workload, err)
			}
		}
		return lines
	}
	if h.pool == nil {
		return failAll(notAvailable("no database URL to seed the history"))
	}
	box := "bench-w6-" + h.runID
	if err := h.createBox(ctx, box); err != nil {
		return failAll(err)
	}
	if err := h.c.admin(ctx, h.adminToken, "admin_settings_update", "PATCH", "/boxes/"+box+"/settings",
		map[string]any{"settings": map[string]any{"channel_message_cap": 4 * slices.Max(w6Sizes)}}, nil); err != nil {
		return failAll(err)
	}
	agents, err := h.createAgents(ctx, box, "w6", 1+2*len(w6Sizes))
	if err != nil {
		return failAll(err)
	}
	sender := agents[0]
	samples := h.w6Samples()
	const warm = 3                                 // unmeasured rounds first (connections, caches, plans)
	work := w6Leases + (warm+samples)*w6ClaimLimit // unread rows of every inbox
	// One reader per size, each in its own room with the sender: the sizes are measured in
	// turn, round by round, so the machine's noise falls on all of them alike.
	type inbox struct {
		n        int
		measurer *agent
		sd       *seeder
	}
	var inboxes []inbox
	for i, n := range w6Sizes {
		reader := agents[1+i]
		roomID, err := h.createRoom(ctx, fmt.Sprintf("w6-history-%d", n), sender, []*agent{reader})
		if err != nil {
			return failAll(err)
		}
		measurer, holder := reader.withSession("w6-measure"), reader.withSession("w6-holder")
		measurerID, err := h.c.prime(ctx, measurer)
		if err != nil {
			return failAll(err)
		}
		holderID, err := h.c.prime(ctx, holder)
		if err != nil {
			return failAll(err)
		}
		sd := &seeder{pool: h.pool, box: box, room: roomID, sender: sender.ID, reader: reader.ID, prog: h.prog}
		if err := sd.init(ctx); err != nil {
			return failAll(err)
		}
		sd.sessionID = measurerID // history acknowledged by the measuring session
		if err := sd.grow(ctx, n+work, work); err != nil {
			return failAll(fmt.Errorf("seeding: %w", err))
		}
		// Every row returned to the measuring session; the oldest unread rows leased live
		// to the other session (claims must pass over them, ACKs must not see them).
		if _, err := h.pool.Exec(ctx, `INSERT INTO receipts (box_id, agent_id, inbox_seq, session_id)
			SELECT box_id, agent_id, inbox_seq, $3 FROM attention WHERE box_id = $1 AND agent_id = $2
			ON CONFLICT DO NOTHING`, sd.boxID, reader.ID, measurerID); err != nil {
			return failAll(err)
		}
		if _, err := h.pool.Exec(ctx, `WITH leased AS (
				UPDATE attention SET lease_session_id = $3, lease_expires_at = now() + interval '1 hour'
				WHERE box_id = $1 AND agent_id = $2 AND acked_at IS NULL AND inbox_seq <= (
					SELECT max(inbox_seq) FROM (SELECT inbox_seq FROM attention WHERE box_id = $1 AND agent_id = $2 AND acked_at IS NULL
					                            ORDER BY inbox_seq LIMIT $4) AS oldest)
				RETURNING box_id, agent_id, inbox_seq)
			INSERT INTO receipts (box_id, agent_id, inbox_seq, session_id) SELECT box_id, agent_id, inbox_seq, $3 FROM leased
			ON CONFLICT DO NOTHING`, sd.boxID, reader.ID, holderID, w6Leases); err != nil {
			return failAll(err)
		}
		h.prog.logf("bench: W6 inbox with %d rows of history (+%d leased, %d claimable)", n, w6Leases, work-w6Leases)
		inboxes = append(inboxes, inbox{n: n, measurer: measurer, sd: sd})
	}
	// One more inbox per size whose rows are all unread (an inbox_list reports the unread
	// count: it must not count them).
	unread := make([]*agent, len(w6Sizes))
	for i, n := range w6Sizes {
		reader := agents[1+len(w6Sizes)+i]
		roomID, err := h.createRoom(ctx, fmt.Sprintf("w6-unread-%d", n), sender, []*agent{reader})
		if err != nil {
			return failAll(err)
		}
		sessionID, err := h.c.prime(ctx, reader)
		if err != nil {
			return failAll(err)
		}
		sd := &seeder{pool: h.pool, box: box, room: roomID, sender: sender.ID, reader: reader.ID, prog: h.prog}
		if err := sd.init(ctx); err != nil {
			return failAll(err)
		}
		sd.sessionID = sessionID
		if err := sd.grow(ctx, n, n); err != nil {
			return failAll(fmt.Errorf("seeding: %w", err))
		}
		unread[i] = reader
	}
	if _, err := h.pool.Exec(ctx, "ANALYZE"); err != nil {
		return failAll(err)
	}
	// set records a line's samples and the wall time of the measured rounds they came from.
	set := func(id string, d []time.Duration, measured time.Duration, extra map[string]float64) {
		for i := range lines {
			if lines[i].ID == id {
				lines[i] = latencyResult(lines[i], d)
				lines[i].DurationS = measured.Seconds()
				lines[i].Extra = extra
			}
		}
	}
	lists, claims, acks := make([][]time.Duration, len(inboxes)), make([][]time.Duration, len(inboxes)), make([][]time.Duration, len(inboxes))
	// keep records a sample from the unmeasured rounds on.
	keep := func(into *[]time.Duration, i int, d time.Duration) {
		if i >= warm {
			*into = append(*into, d)
		}
	}
	// profiled attributes what the database did for the call just made to line id (the
	// unmeasured rounds to none).
	prof := h.newCallProfiles(ctx)
	profiled := func(id string, i int) {
		if i >= warm {
			prof.done(ctx, id)
		} else {
			prof.skip(ctx)
		}
	}
	var measuring time.Time
	for i := range warm + samples {
		if i == warm {
			measuring = time.Now()
		}
		if i >= warm+w6MinSamples && time.Since(measuring) >= h.cfg.Duration {
			break
		}
		for k, ib := range inboxes {
			n, measurer := ib.n, ib.measurer
			t0 := time.Now()
			if err := h.c.call(ctx, measurer, "inbox_list", "GET", "/inbox?filter=unread&limit=50", nil, nil); err != nil {
				return failAll(err)
			}
			keep(&lists[k], i, time.Since(t0))
			profiled(fmt.Sprintf("W6.inbox_list.%d", n), i)
			var claimed struct {
				Items []inboxItem `json:"items"`
			}
			key := fmt.Sprintf("w6-%s-%d-%d", h.runID, n, i)
			t0 = time.Now()
			if err := h.c.call(ctx, measurer, "inbox_claim", "POST", "/inbox/claim",
				map[string]any{"limit": w6ClaimLimit, "lease_seconds": 300, "idempotency_key": "c-" + key}, &claimed); err != nil {
				return failAll(err)
			}
			keep(&claims[k], i, time.Since(t0))
			profiled(fmt.Sprintf("W6.claim.%d", n), i)
			if len(claimed.Items) != w6ClaimLimit {
				return failAll(fmt.Errorf("W6 claim at %d rows returned %d rows, want %d", n, len(claimed.Items), w6ClaimLimit))
			}
			seqs := make([]string, len(claimed.Items))
			for j, it := range claimed.Items {
				seqs[j] = it.InboxSeq
			}
			ack, _ := json.Marshal(map[string]any{"inbox_seqs": seqs, "idempotency_key": "a-" + key})
			t0 = time.Now()
			if err := h.c.call(ctx, measurer, "inbox_ack", "POST", "/inbox/ack", ack, nil); err != nil {
				return failAll(err)
			}
			keep(&acks[k], i, time.Since(t0))
			profiled(fmt.Sprintf("W6.ack.%d", n), i)
		}
	}
	inboxMeasured := time.Since(measuring)
	for k, ib := range inboxes {
		extra := map[string]float64{"history_rows": float64(ib.n), "live_leases": w6Leases}
		set(fmt.Sprintf("W6.inbox_list.%d", ib.n), lists[k], inboxMeasured, extra)
		set(fmt.Sprintf("W6.claim.%d", ib.n), claims[k], inboxMeasured, extra)
		set(fmt.Sprintf("W6.ack.%d", ib.n), acks[k], inboxMeasured, extra)
	}
	// The unread inboxes, in turn, round by round; a page lists the same oldest rows each
	// time (its receipts are written once). A list consumes nothing, so these rounds run for
	// the phase duration whatever w6Samples is (600 rounds took 6 s on a fast day).
	unreadLists := make([][]time.Duration, len(unread))
	for i := 0; ; i++ {
		if i == warm {
			measuring = time.Now()
		}
		if i >= warm+w6MinSamples && time.Since(measuring) >= h.cfg.Duration {
			break
		}
		for k, reader := range unread {
			t0 := time.Now()
			if err := h.c.call(ctx, reader, "inbox_list", "GET", "/inbox?filter=unread&limit=50", nil, nil); err != nil {
				return failAll(err)
			}
			keep(&unreadLists[k], i, time.Since(t0))
			profiled(fmt.Sprintf("W6.inbox_list_unread.%d", w6Sizes[k]), i)
		}
	}
	unreadMeasured := time.Since(measuring)
	for k, n := range w6Sizes {
		set(fmt.Sprintf("W6.inbox_list_unread.%d", n), unreadLists[k], unreadMeasured, map[string]float64{"unread_rows": float64(n)})
	}
	largest := inboxes[len(inboxes)-1]
	roomID, sd := largest.sd.room, largest.sd

	// A box created after the last ANALYZE, sending next to the box with the longest history.
	fresh := "bench-w6-new-" + h.runID
	if err := h.createBox(ctx, fresh); err != nil {
		return failAll(err)
	}
	freshAgents, err := h.createAgents(ctx, fresh, "w6n", 2)
	if err != nil {
		return failAll(err)
	}
	freshRoom, err := h.createRoom(ctx, "w6-new", freshAgents[0], []*agent{freshAgents[1]})
	if err != nil {
		return failAll(err)
	}
	// Sends do not use up the inbox, so they run for the phase duration like the other
	// workloads (and at least the sample count).
	var inNew, inLarge []time.Duration
	var sending time.Time
	for i := 0; i < warm+samples || time.Since(sending) < h.cfg.Duration; i++ {
		if i == warm {
			sending = time.Now()
		}
		for _, s := range []struct {
			from *agent
			room string
			into *[]time.Duration
			id   string
		}{{sender, roomID, &inLarge, "W6.send.large_box"}, {freshAgents[0], freshRoom, &inNew, "W6.send.new_box"}} {
			tag := fmt.Sprintf("w6 send %d %s %s", i, s.room, h.runID)
			t0 := time.Now()
			if err := h.c.call(ctx, s.from, "message_send", "POST", "/messages", sendBody("room", s.room, tag, tag), nil); err != nil {
				return failAll(err)
			}
			keep(s.into, i, time.Since(t0))
			profiled(s.id, i)
		}
	}
	sendMeasured := time.Since(sending)
	set("W6.send.new_box", inNew, sendMeasured, nil)
	set("W6.send.large_box", inLarge, sendMeasured, map[string]float64{"history_messages": float64(sd.count)})
	prof.profiles(ctx, lines)
	return lines
}

// latencyResult fills r from sequential latency samples.
func latencyResult(r Result, d []time.Duration) Result {
	sorted := slices.Clone(d)
	slices.Sort(sorted)
	r.Status = StatusOK
	r.Ops = int64(len(d))
	r.Clients = 1
	r.P50Ms, r.P99Ms = ms(percentile(sorted, 50)), ms(percentile(sorted, 99))
	var sum time.Duration
	for _, x := range d {
		sum += x
	}
	if len(d) > 0 {
		r.MeanMs = ms(sum / time.Duration(len(d)))
	}
	r.Throughput = r.P50Ms
	return r
}
