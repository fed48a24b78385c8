package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"time"
)

// roomMembers is W1's room size: the sender plus nine recipients.
const roomMembers = 10

// body1KiB is a 1 KiB message body that starts with a unique tag (a byte-identical body
// would be suppressed as a consecutive duplicate and write nothing).
func body1KiB(tag string) string {
	const size = 1024
	if len(tag) >= size {
		return tag[:size]
	}
	return tag + " " + strings.Repeat("x", size-len(tag)-1)
}

// sendBody encodes a message_send request.
func sendBody(kind, to, body, key string) []byte {
	dest := map[string]string{"kind": kind}
	if kind == "dm" {
		dest["recipient_agent_id"] = to
	} else {
		dest["room_id"] = to
	}
	b, _ := json.Marshal(map[string]any{"destination": dest, "body_md": body, "idempotency_key": key})
	return b
}

// w1 measures message_send into 10-member rooms whose members all follow `all`. Each
// client sends as one member of one room; by default every client has its own room
// (W1Rooms lowers that to put several senders in one room). It runs twice on the same
// rooms: first right after setup, without a warm-up (W1.first: what a user sees on a
// fresh server, with empty rooms, cold plan caches and a pool still growing), then warm
// (W1, after the configured warm-up).
func (h *harness) w1(ctx context.Context) []Result {
	first := Result{ID: "W1.first", Workload: "W1 room send, first run (no warm-up)", Unit: "messages/s", API: true}
	base := Result{ID: "W1", Workload: "W1 room send (10 members, 1 KiB), warm", Unit: "messages/s", API: true}
	fail := func(err error) []Result {
		return []Result{failed(first.ID, first.Workload, err), failed(base.ID, base.Workload, err)}
	}
	box := "bench-w1-" + h.runID
	if err := h.createBox(ctx, box); err != nil {
		return fail(err)
	}
	rooms := min(h.cfg.W1Rooms, h.cfg.Clients)
	h.prog.logf("bench: W1 setup: %d agents in %d rooms", rooms*roomMembers, rooms)
	agents, err := h.createAgents(ctx, box, "w1", rooms*roomMembers)
	if err != nil {
		return fail(err)
	}
	roomIDs := make([]string, rooms)
	if err := parallel(ctx, rooms, 8, func(ctx context.Context, r int) error {
		members := agents[r*roomMembers : (r+1)*roomMembers]
		id, err := h.createRoom(ctx, fmt.Sprintf("w1-room-%03d", r), members[0], members[1:])
		roomIDs[r] = id
		return err
	}); err != nil {
		return fail(err)
	}
	counters := make([]int, h.cfg.Clients)
	var badAttention atomic.Int64
	send := func(ctx context.Context, c int) (int, error) {
		r := c % rooms
		sender := agents[r*roomMembers+(c/rooms)%roomMembers]
		counters[c]++
		tag := fmt.Sprintf("w1 %s c%d n%d", h.runID, c, counters[c])
		var out sendResult
		err := h.c.call(ctx, sender, "message_send", "POST", "/messages",
			sendBody("room", roomIDs[r], body1KiB(tag), tag), &out)
		if err == nil && (out.Status != "sent" || out.AttentionCount != roomMembers-1) {
			badAttention.Add(1)
			err = fmt.Errorf("message_send: status %q with %d attention rows, want sent with %d", out.Status, out.AttentionCount, roomMembers-1)
		}
		return 1, err
	}
	measure := func(r Result, warmup time.Duration, onMeasure func(context.Context, window)) (Result, error) {
		p := phase{Label: r.Workload, Clients: h.cfg.Clients, Warmup: warmup, Duration: h.cfg.Duration, OnMeasure: onMeasure}
		res, rss, extra, err := h.observed(ctx, p, true, send)
		if err != nil {
			return r, err
		}
		out := r.fromPhase(res, h.cfg.Clients)
		out.RSSPeakMiB = rss
		out.Extra = extra
		if out.Extra == nil {
			out.Extra = map[string]float64{}
		}
		out.Extra["rooms"] = float64(rooms)
		return out, nil
	}
	firstOut, err := measure(first, 0, nil)
	if err != nil {
		return fail(err)
	}
	onMeasure, waitProfile := h.profileDuring("w1.cpu.pprof")
	out, err := measure(base, h.cfg.Warmup, onMeasure)
	waitProfile()
	if err != nil {
		return []Result{firstOut, failed(base.ID, base.Workload, err)}
	}
	if h.cfg.Pprof && h.cfg.OutDir != "" {
		for _, p := range h.profiles {
			if strings.HasSuffix(p, "w1.cpu.pprof") {
				h.rep.ProfileTop = profileTop(ctx, p)
			}
		}
	}
	return []Result{firstOut, out}
}

// w2 measures a DM round trip: A sends B a DM, B lists its unread inbox (filtered to the
// DM pair) until the message shows, then ACKs it. Each client has its own pair.
func (h *harness) w2(ctx context.Context) []Result {
	base := Result{ID: "W2", Workload: "W2 DM round trip (send, inbox_list, inbox_ack)", Unit: "round trips/s", API: true}
	fail := func(err error) []Result { return []Result{failed(base.ID, base.Workload, err)} }
	box := "bench-w2-" + h.runID
	if err := h.createBox(ctx, box); err != nil {
		return fail(err)
	}
	h.prog.logf("bench: W2 setup: %d agent pairs", h.cfg.Clients)
	agents, err := h.createAgents(ctx, box, "w2", 2*h.cfg.Clients)
	if err != nil {
		return fail(err)
	}
	// One serial read first, as W3 and W4 do: it tells a missing operation apart, and it
	// warms what a fresh server loads on its first paged read (the cursor key, fetched
	// through a second pool connection while the first is held: 64 concurrent first reads
	// on a pool of 4 stall until the clients give up).
	if err := h.c.call(ctx, agents[1], "inbox_list", "GET", "/inbox?filter=unread&limit=1", nil, nil); err != nil {
		return fail(err)
	}
	counters := make([]int, h.cfg.Clients)
	p := phase{Label: base.Workload, Clients: h.cfg.Clients, Warmup: h.cfg.Warmup, Duration: h.cfg.Duration}
	res, rss, extra, err := h.observed(ctx, p, true, func(ctx context.Context, c int) (int, error) {
		a, b := agents[2*c], agents[2*c+1]
		counters[c]++
		tag := fmt.Sprintf("w2 %s c%d n%d", h.runID, c, counters[c])
		var sent sendResult
		if err := h.c.call(ctx, a, "message_send", "POST", "/messages", sendBody("dm", b.ID, tag, "s-"+tag), &sent); err != nil {
			return 1, err
		}
		requests := 1
		listPath := "/inbox?filter=unread&limit=50&" + destinationQuery("dm", a.ID)
		for attempt := 0; ; attempt++ {
			var page inboxPage
			requests++
			if err := h.c.call(ctx, b, "inbox_list", "GET", listPath, nil, &page); err != nil {
				return requests, err
			}
			seq := ""
			for _, it := range page.Items {
				if it.Message.MessageID == sent.MessageID {
					seq = it.InboxSeq
					break
				}
			}
			if seq == "" {
				// A committed send is visible at once; only a page full of older unread
				// rows (left by a failed ACK) could hide it.
				if attempt >= 2 {
					return requests, fmt.Errorf("inbox_list: message %s not in the recipient's unread page", sent.MessageID)
				}
				continue
			}
			requests++
			ack, _ := json.Marshal(map[string]any{"inbox_seqs": []string{seq}, "idempotency_key": "a-" + tag})
			return requests, h.c.call(ctx, b, "inbox_ack", "POST", "/inbox/ack", ack, nil)
		}
	})
	if err != nil {
		return fail(err)
	}
	out := base.fromPhase(res, h.cfg.Clients)
	out.RSSPeakMiB = rss
	out.Extra = extra
	return []Result{out}
}
