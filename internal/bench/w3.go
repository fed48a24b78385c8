package bench

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// w3 measures how read latency grows with history: inbox_list (page 50, unread) and
// conversation_read (page 50, from the start) of one reader, first with W3Small messages
// of history in the box, then with W3Large. The history is seeded in bulk with SQL (not
// through the API) in one room the reader follows; all but the newest W3Unread attention
// rows are acknowledged, so the unread set (and its count) is the same size at both
// points and only the history grows.
func (h *harness) w3(ctx context.Context) []Result {
	small, large := countLabel(h.cfg.W3Small), countLabel(h.cfg.W3Large)
	lines := []Result{
		{ID: "W3.inbox_list.small", Workload: "W3 inbox_list @" + small, Unit: "requests/s", API: true},
		{ID: "W3.conversation_read.small", Workload: "W3 conversation_read @" + small, Unit: "requests/s", API: true},
		{ID: "W3.inbox_list.large", Workload: "W3 inbox_list @" + large, Unit: "requests/s", API: true},
		{ID: "W3.conversation_read.large", Workload: "W3 conversation_read @" + large, Unit: "requests/s", API: true},
	}
	// failFrom marks lines[i:] with err.
	failFrom := func(i int, err error) []Result {
		for j := i; j < len(lines); j++ {
			lines[j] = failed(lines[j].ID, lines[j].Workload, err)
		}
		return lines
	}
	if h.pool == nil {
		return failFrom(0, notAvailable("no database URL to seed the history"))
	}
	box := "bench-w3-" + h.runID
	if err := h.createBox(ctx, box); err != nil {
		return failFrom(0, err)
	}
	// The history lives in one room: its per-channel retention cap must hold it.
	if err := h.c.admin(ctx, h.adminToken, "admin_settings_update", "PATCH", "/boxes/"+box+"/settings",
		map[string]any{"settings": map[string]any{"channel_message_cap": 2 * h.cfg.W3Large}}, nil); err != nil {
		return failFrom(0, err)
	}
	agents, err := h.createAgents(ctx, box, "w3", 2)
	if err != nil {
		return failFrom(0, err)
	}
	sender, reader := agents[0], agents[1]
	roomID, err := h.createRoom(ctx, "w3-history", sender, []*agent{reader})
	if err != nil {
		return failFrom(0, err)
	}
	readers, err := h.primeSessions(ctx, reader, "w3", h.cfg.W3Clients)
	if err != nil {
		return failFrom(0, err)
	}
	// The API must answer before seeding matters: a missing read makes seeding pointless.
	inboxPath := "/inbox?filter=unread&limit=50"
	convPath := "/conversation?limit=50&" + destinationQuery("room", roomID)
	probeInbox := h.c.call(ctx, readers[0], "inbox_list", "GET", inboxPath, nil, nil)
	probeConv := h.c.call(ctx, readers[0], "conversation_read", "GET", convPath, nil, nil)
	if _, ok := errorsAsNotAvailable(probeInbox); ok {
		lines[0], lines[2] = failed(lines[0].ID, lines[0].Workload, probeInbox), failed(lines[2].ID, lines[2].Workload, probeInbox)
	}
	if _, ok := errorsAsNotAvailable(probeConv); ok {
		lines[1], lines[3] = failed(lines[1].ID, lines[1].Workload, probeConv), failed(lines[3].ID, lines[3].Workload, probeConv)
	}
	if lines[0].Status != "" && lines[1].Status != "" {
		return lines
	}

	sd := &seeder{pool: h.pool, box: box, room: roomID, sender: sender.ID, reader: reader.ID, prog: h.prog}
	if err := sd.init(ctx); err != nil {
		return failFrom(0, err)
	}
	ops := []struct {
		path string
		op   string
	}{{inboxPath, "inbox_list"}, {convPath, "conversation_read"}}
	for stage, size := range []int{h.cfg.W3Small, h.cfg.W3Large} {
		t0 := time.Now()
		if err := sd.grow(ctx, size, h.cfg.W3Unread); err != nil {
			return failFrom(2*stage, fmt.Errorf("seeding: %w", err))
		}
		seeded := time.Since(t0)
		h.prog.logf("bench: W3 history seeded to %d messages in %s", size, seeded.Round(100*time.Millisecond))
		for i, o := range ops {
			idx := 2*stage + i
			if lines[idx].Status != "" {
				continue
			}
			p := phase{Label: lines[idx].Workload, Clients: h.cfg.W3Clients, Warmup: h.cfg.Warmup, Duration: h.cfg.Duration}
			var short atomic.Int64 // pages with fewer than 50 rows: the read did not do the work measured
			res, err := h.profiled(ctx, p, func(ctx context.Context, c int) (int, error) {
				var page messagePage
				if err := h.c.call(ctx, readers[c], o.op, "GET", o.path, nil, &page); err != nil {
					return 1, err
				}
				if len(page.Items) != 50 {
					short.Add(1)
				}
				return 1, nil
			})
			if err != nil {
				lines[idx] = failed(lines[idx].ID, lines[idx].Workload, err)
				continue
			}
			lines[idx] = lines[idx].fromPhase(res, h.cfg.W3Clients)
			lines[idx].Throughput = lines[idx].RequestsPerS
			lines[idx].Extra = map[string]float64{"history_messages": float64(size), "seed_seconds": seeded.Seconds()}
			if n := short.Load(); n > 0 {
				lines[idx].Note = strings.TrimPrefix(lines[idx].Note+fmt.Sprintf("; %d answers had fewer than 50 rows", n), "; ")
			}
		}
	}
	return lines
}

// seeder writes room history straight into the messaging tables, keeping the invariants
// the service relies on (queries/schema/0002_messaging.sql, 0005, 0006, 0025): message_seq
// comes from the box's message sequence in order, the channel row is locked first and then the
// reader's inbox (shared advisory lock) before inbox_seq is drawn from the box's inbox
// sequence, channels.last_message_seq
// ends at the new high and message_count counts the new rows, inbox_seq follows message_seq,
// and the sender's duplicate-suppression reference points at its newest message.
type seeder struct {
	pool                      *pgxpool.Pool
	box, room, sender, reader string
	prog                      *progress

	boxID     string
	sessionID string
	base      time.Time // created_at of message 0; messages are 1 ms apart
	count     int
}

func (s *seeder) init(ctx context.Context) error {
	if err := s.pool.QueryRow(ctx, `SELECT box_id::text FROM boxes WHERE box_key = $1`, s.box).Scan(&s.boxID); err != nil {
		return fmt.Errorf("box %s: %w", s.box, err)
	}
	// Acknowledged history names a session of the reader.
	if err := s.pool.QueryRow(ctx, `SELECT session_id::text FROM sessions WHERE box_id = $1 AND agent_id = $2 ORDER BY created_at LIMIT 1`,
		s.boxID, s.reader).Scan(&s.sessionID); err != nil {
		return fmt.Errorf("reader session: %w", err)
	}
	s.base = time.Now().UTC().Add(-24 * time.Hour)
	return nil
}

// seedChunk bounds one transaction of seeding.
const seedChunk = 100_000

// grow adds messages until the room holds total of them, then leaves exactly the newest
// unread attention rows unacknowledged.
func (s *seeder) grow(ctx context.Context, total, unread int) error {
	for s.count < total {
		n := min(seedChunk, total-s.count)
		if err := s.insert(ctx, s.count, n); err != nil {
			return err
		}
		s.count += n
		if total >= 5*seedChunk {
			s.prog.logf("bench: W3 seeding: %d/%d messages", s.count, total)
		}
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		// Everything read (leases ended), then the newest rows unread again.
		if _, err := tx.Exec(ctx, `UPDATE attention SET acked_at = $3, acked_by_session_id = $4, lease_session_id = NULL, lease_expires_at = NULL
			WHERE box_id = $1 AND agent_id = $2 AND acked_at IS NULL`, s.boxID, s.reader, time.Now().UTC(), s.sessionID); err != nil {
			return err
		}
		// A range from the unread set's lowest seq (an InitPlan), not IN (subquery): the
		// planner estimates a box created after the last ANALYZE at a row or two
		// (the inbox_paths migration) and could join the two scans as a nested loop.
		_, err := tx.Exec(ctx, `UPDATE attention SET acked_at = NULL, acked_by_session_id = NULL
			WHERE box_id = $1 AND agent_id = $2 AND inbox_seq >= (
				SELECT min(inbox_seq) FROM (SELECT inbox_seq FROM attention WHERE box_id = $1 AND agent_id = $2 ORDER BY inbox_seq DESC LIMIT $3) AS newest)`,
			s.boxID, s.reader, unread)
		if err != nil {
			return err
		}
		// The unread counters (0015_inbox_counts.sql) from the rows just written.
		_, err = tx.Exec(ctx, `SELECT inbox_recount($1)`, s.boxID)
		return err
	})
	if err != nil {
		return err
	}
	// Fresh statistics, so the planner sees the grown tables as it will in production.
	_, err = s.pool.Exec(ctx, "ANALYZE messages, attention, channels, receipts")
	return err
}

// seedSQL inserts messages $5..$6 of the room and one acknowledged attention row per
// message for the reader (inbox_seq drawn in message_seq order), returning the newest message.
const seedSQL = `
WITH m AS (
    INSERT INTO messages (box_id, message_id, message_seq, channel_id, sender_agent_id, dest_kind, dest_room_id,
                          body_md, thread_root_id, content_hash, created_at)
    SELECT $1, id, nextval(box_message_seq($1)), $2, $3, 'room', $2,
           body, id, sha256(convert_to(body, 'UTF8')), $4::timestamptz + g * interval '1 millisecond'
    FROM (SELECT g, gen_random_uuid() AS id,
                 'history message ' || g || ': ' || repeat('lorem ipsum ', 16) AS body
          FROM generate_series($5::bigint, $6::bigint) AS g) AS src
    RETURNING message_id, message_seq, created_at, content_hash
), a AS (
    INSERT INTO attention (box_id, agent_id, inbox_seq, message_id, channel_id, reasons, acked_at, acked_by_session_id)
    SELECT $1, $7, nextval(box_inbox_seq($1)), message_id, $2, 2, created_at, $8
    FROM (SELECT message_id, created_at FROM m ORDER BY message_seq) AS ordered
    RETURNING inbox_seq
)
SELECT (SELECT count(*) FROM a), last.message_seq, last.message_id, last.content_hash
FROM (SELECT message_seq, message_id, content_hash FROM m ORDER BY message_seq DESC LIMIT 1) AS last`

// insert seeds messages [from, from+n) in one transaction, locking as a send does.
func (s *seeder) insert(ctx context.Context, from, n int) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SET LOCAL synchronous_commit = off"); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `SELECT 1 FROM channels WHERE box_id = $1 AND channel_id = $2 FOR UPDATE`, s.boxID, s.room); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock_shared(inbox_lock_key($1, $2))`, s.boxID, s.reader); err != nil {
			return err
		}
		var rows, lastSeq int64
		var lastID string
		var lastHash []byte
		if err := tx.QueryRow(ctx, seedSQL, s.boxID, s.room, s.sender, s.base, from, from+n-1, s.reader, s.sessionID).
			Scan(&rows, &lastSeq, &lastID, &lastHash); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE channels SET last_message_seq = $3, message_count = message_count + $4 WHERE box_id = $1 AND channel_id = $2`,
			s.boxID, s.room, lastSeq, rows); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO channel_sender_latest (box_id, channel_id, sender_agent_id, message_id, content_hash)
			VALUES ($1, $2, $3, $4, $5)
			ON CONFLICT (box_id, channel_id, sender_agent_id) DO UPDATE SET message_id = EXCLUDED.message_id, content_hash = EXCLUDED.content_hash`,
			s.boxID, s.room, s.sender, lastID, lastHash)
		return err
	})
}
