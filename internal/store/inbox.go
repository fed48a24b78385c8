package store

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/agentbox/agentbox/gen/db"
)

// InboxUpper is the agent's committed inbox upper bound: every attention row at or below it
// is committed and visible to the transaction's next statement, and every row committed later
// is above it. It waits for the sends to this inbox in flight (see 0006_inbox_seq.sql).
func (t *Tx) InboxUpper(ctx context.Context, boxID, agentID uuid.UUID) (int64, error) {
	return t.q.InboxUpper(ctx, db.InboxUpperParams{BoxID: boxID, AgentID: agentID})
}

// InboxFilter selects the rows of an inbox page.
type InboxFilter struct {
	State   string    // unread | all | acked
	Channel uuid.UUID // one room or DM pair; uuid.Nil for every channel
}

// InboxSeqs returns the inbox_seqs of the agent's accessible rows matching f in the window,
// ascending.
func (t *Tx) InboxSeqs(ctx context.Context, boxID, agentID uuid.UUID, f InboxFilter, w SeqRange) ([]int64, error) {
	acked := f.State == "acked"
	switch {
	case f.Channel == uuid.Nil && f.State == "unread":
		return t.q.InboxUnreadSeqs(ctx, db.InboxUnreadSeqsParams{BoxID: boxID, AgentID: agentID, After: w.After, Upper: w.Upper, MaxRows: w.Max})
	case f.Channel == uuid.Nil:
		return t.q.InboxSeqs(ctx, db.InboxSeqsParams{BoxID: boxID, AgentID: agentID, AckedOnly: acked, After: w.After, Upper: w.Upper, MaxRows: w.Max})
	case f.State == "unread":
		return t.q.InboxChannelUnreadSeqs(ctx, db.InboxChannelUnreadSeqsParams{BoxID: boxID, AgentID: agentID, ChannelID: f.Channel,
			After: w.After, Upper: w.Upper, MaxRows: w.Max})
	case acked:
		return t.q.InboxChannelAckedSeqs(ctx, db.InboxChannelAckedSeqsParams{BoxID: boxID, AgentID: agentID, ChannelID: f.Channel,
			After: w.After, Upper: w.Upper, MaxRows: w.Max})
	default:
		return t.q.InboxChannelSeqs(ctx, db.InboxChannelSeqsParams{BoxID: boxID, AgentID: agentID, ChannelID: f.Channel,
			After: w.After, Upper: w.Upper, MaxRows: w.Max})
	}
}

// InboxRow is one attention row with its message.
type InboxRow struct {
	Seq            int64
	Reasons        int64
	Message        Message
	AckedAt        *time.Time
	AckedBy        *uuid.UUID
	LeaseSession   *uuid.UUID
	LeaseExpiresAt *time.Time
	// ParentVisible: the message's reply parent still exists above the agent's read floor.
	ParentVisible bool
	// RootVisible: likewise its thread root, for a reply whose root is not its parent (a
	// message that is no reply is its own root; a reply to the root has ParentVisible).
	RootVisible bool
}

// InboxRows loads the agent's attention rows with these seqs, ascending.
func (t *Tx) InboxRows(ctx context.Context, boxID, agentID uuid.UUID, seqs []int64) ([]InboxRow, error) {
	if len(seqs) == 0 {
		return nil, nil
	}
	return t.inboxRows(ctx, t.q, boxID, agentID, seqs)
}

func (t *Tx) inboxRows(ctx context.Context, q *db.Queries, boxID, agentID uuid.UUID, seqs []int64) ([]InboxRow, error) {
	rows, err := q.InboxRows(ctx, db.InboxRowsParams{BoxID: boxID, AgentID: agentID, InboxSeqs: seqs})
	out := make([]InboxRow, 0, len(rows))
	for _, r := range rows {
		out = append(out, InboxRow{Seq: r.InboxSeq, Reasons: int64(r.Reasons),
			Message: messageFrom(r.Message, r.SenderName, r.AttachmentID, r.AttachmentName, r.AttachmentMediaType, r.AttachmentSizeBytes, r.AttachmentSha256),
			AckedAt: r.AckedAt, AckedBy: r.AckedBySessionID, LeaseSession: r.LeaseSessionID, LeaseExpiresAt: r.LeaseExpiresAt,
			ParentVisible: r.ParentVisible, RootVisible: r.RootVisible})
	}
	return out, err
}

// ReadableInboxRows are InboxRows restricted to the rows the agent may still read (accessible:
// its room membership and read floor, as an ACK checks them); rows deleted with their message
// are gone from both. Both statements go in one round trip, each reading what committed
// before it started. A claim's replay shows only these rows (SPEC §5: leaving revokes reads
// at once; §11: no archive of deleted content), and a claim leases only these among the rows
// it locked: the check in its locking statement (LockClaimable) reads a snapshot taken when
// that statement started, and a room leave that committed before the statement reached a
// row (the leave's lock on it gone) is not in it, so that check alone would lease a left
// room's row. Checked here, after the lock, such a row is not leased; a leave that had not
// committed yet waits for the claim (LockRoomUnread) and then ends its leases.
func (t *Tx) ReadableInboxRows(ctx context.Context, boxID, agentID, sessionID uuid.UUID, seqs []int64) ([]InboxRow, error) {
	if len(seqs) == 0 {
		return nil, nil
	}
	var states []db.AckRowStatesRow
	var rows []InboxRow
	err := t.pipeline(ctx,
		func(q *db.Queries) (err error) {
			states, err = q.AckRowStates(ctx, db.AckRowStatesParams{BoxID: boxID, AgentID: agentID, SessionID: sessionID, InboxSeqs: seqs})
			return err
		},
		func(q *db.Queries) (err error) {
			rows, err = t.inboxRows(ctx, q, boxID, agentID, seqs)
			return err
		})
	if err != nil {
		return nil, err
	}
	readable := make(map[int64]bool, len(states))
	for _, st := range states {
		readable[st.InboxSeq] = st.Accessible
	}
	kept := rows[:0]
	for _, r := range rows {
		if readable[r.Seq] {
			kept = append(kept, r)
		}
	}
	return kept, nil
}

// RecordInboxReceipts records that session was shown these rows of the agent's inbox.
func (t *Tx) RecordInboxReceipts(ctx context.Context, boxID, agentID, sessionID uuid.UUID, seqs []int64) error {
	if len(seqs) == 0 {
		return nil
	}
	return t.q.RecordInboxReceipts(ctx, db.RecordInboxReceiptsParams{BoxID: boxID, AgentID: agentID, SessionID: sessionID, InboxSeqs: seqs})
}

// InboxCounts are an agent's live inbox counts at one instant.
type InboxCounts struct {
	Unread          int64 // accessible unread rows
	Leased          int64 // live leases of the agent
	LeasedBySession int64 // live leases held by the session
}

// InboxCounts counts the agent's unread rows and live leases.
func (t *Tx) InboxCounts(ctx context.Context, boxID, agentID, sessionID uuid.UUID, now time.Time) (InboxCounts, error) {
	r, err := t.q.InboxCounts(ctx, db.InboxCountsParams{BoxID: boxID, AgentID: agentID, SessionID: sessionID, Now: now})
	return InboxCounts{Unread: r.Unread, Leased: r.Leased, LeasedBySession: r.LeasedBySession}, err
}

// AckCandidate is an attention row an ACK names, as the ACK rules see it.
type AckCandidate struct {
	AckedAt        *time.Time
	AckedBy        *uuid.UUID
	LeaseSession   *uuid.UUID
	LeaseExpiresAt *time.Time
	Accessible     bool // the agent may still act on the row
	Returned       bool // returned to the session: its receipt, its lease or its first ACK
	LeaseReplaced  bool // the session's lease expired and another session claimed the row
}

// LockAckCandidates locks the agent's rows with these seqs until commit and returns them by
// seq (missing seqs are absent). A row was returned to the session if the session has a
// receipt of it, holds its lease, or made its first ACK (a lease is its session's receipt:
// LeaseRows); a receipt's lease_replaced mark counts only while another session holds the
// row. Accessibility and the receipts are read in the same round trip after the lock
// (AckRowStates says why).
func (t *Tx) LockAckCandidates(ctx context.Context, boxID, agentID, sessionID uuid.UUID, seqs []int64) (map[int64]AckCandidate, error) {
	var rows []db.LockAckRowsRow
	var states []db.AckRowStatesRow
	err := t.pipeline(ctx,
		func(q *db.Queries) (err error) {
			rows, err = q.LockAckRows(ctx, db.LockAckRowsParams{BoxID: boxID, AgentID: agentID, InboxSeqs: seqs})
			return err
		},
		func(q *db.Queries) (err error) {
			states, err = q.AckRowStates(ctx, db.AckRowStatesParams{BoxID: boxID, AgentID: agentID, SessionID: sessionID, InboxSeqs: seqs})
			return err
		})
	if err != nil {
		return nil, err
	}
	byseq := make(map[int64]db.AckRowStatesRow, len(states))
	for _, st := range states {
		byseq[st.InboxSeq] = st
	}
	out := make(map[int64]AckCandidate, len(rows))
	for _, r := range rows {
		st, found := byseq[r.InboxSeq] // always, for a locked row: nothing deletes it before commit
		leasedHere := r.LeaseSessionID != nil && *r.LeaseSessionID == sessionID
		ackedHere := r.AckedBySessionID != nil && *r.AckedBySessionID == sessionID
		out[r.InboxSeq] = AckCandidate{AckedAt: r.AckedAt, AckedBy: r.AckedBySessionID, LeaseSession: r.LeaseSessionID,
			LeaseExpiresAt: r.LeaseExpiresAt, Accessible: found && st.Accessible, Returned: st.HasReceipt || leasedHere || ackedHere,
			LeaseReplaced: st.LeaseReplaced && !leasedHere}
	}
	return out, nil
}

// LeaseHolder is a session that held (or holds) the lease on an attention row.
type LeaseHolder struct {
	Seq     int64
	Session uuid.UUID
}

// AckRows marks unacknowledged rows read by session at now and ends their leases; ended are
// the rows among them whose expired lease another session held, which keep that session's
// receipt (its lease was one: LeaseRows). The rows are locked (LockAckCandidates) and the
// ACK's result does not depend on these statements, so they are sent with the COMMIT, in the
// same round trip (as PutIdempotencyRecord): call it once everything else the ACK reads is
// read. A failure fails the commit. Sent last, the acked counters AckRows writes are held
// only while the ACK commits (0015_inbox_counts.sql).
func (t *Tx) AckRows(ctx context.Context, boxID, agentID, sessionID uuid.UUID, seqs []int64, ended []LeaseHolder, now time.Time) error {
	if len(seqs) == 0 {
		return nil
	}
	if len(ended) > 0 {
		endedSeqs, holders := holderArrays(ended)
		t.c.atCommit = append(t.c.atCommit, func(q *db.Queries) error {
			return q.KeepLeaseReceipts(ctx, db.KeepLeaseReceiptsParams{BoxID: boxID, AgentID: agentID, InboxSeqs: endedSeqs, SessionIds: holders})
		})
	}
	t.c.atCommit = append(t.c.atCommit, func(q *db.Queries) error {
		return q.AckRows(ctx, db.AckRowsParams{BoxID: boxID, AgentID: agentID, SessionID: sessionID, InboxSeqs: seqs, Now: now})
	})
	return nil
}

func holderArrays(hs []LeaseHolder) ([]int64, []uuid.UUID) {
	seqs, sessions := make([]int64, len(hs)), make([]uuid.UUID, len(hs))
	for i, h := range hs {
		seqs[i], sessions[i] = h.Seq, h.Session
	}
	return seqs, sessions
}

// LockClaimable locks up to max accessible unread rows that no live lease holds (oldest or
// newest first) until commit, skipping rows other transactions hold, and returns their seqs.
// Rows are locked first and checked after (LockClaimCandidates*, queries/inbox.sql says why);
// only when a full batch held a row the agent can no longer read does it look again with
// the check in the scan (ClaimAccessible*), so such rows never cut a claim short.
func (t *Tx) LockClaimable(ctx context.Context, boxID, agentID uuid.UUID, newest bool, max int32, now time.Time) ([]int64, error) {
	var rows []db.LockClaimCandidatesOldestRow
	var err error
	if newest {
		var nrows []db.LockClaimCandidatesNewestRow
		nrows, err = t.q.LockClaimCandidatesNewest(ctx, db.LockClaimCandidatesNewestParams{BoxID: boxID, AgentID: agentID, Now: now, MaxRows: max})
		for _, r := range nrows {
			rows = append(rows, db.LockClaimCandidatesOldestRow(r))
		}
	} else {
		rows, err = t.q.LockClaimCandidatesOldest(ctx, db.LockClaimCandidatesOldestParams{BoxID: boxID, AgentID: agentID, Now: now, MaxRows: max})
	}
	if err != nil {
		return nil, err
	}
	seqs := make([]int64, 0, len(rows))
	for _, r := range rows {
		if r.Accessible {
			seqs = append(seqs, r.InboxSeq)
		}
	}
	if len(seqs) == len(rows) || len(rows) < int(max) {
		return seqs, nil // every locked row is claimable, or there are no more to lock
	}
	if newest {
		return t.q.ClaimAccessibleNewest(ctx, db.ClaimAccessibleNewestParams{BoxID: boxID, AgentID: agentID, Now: now, MaxRows: max})
	}
	return t.q.ClaimAccessibleOldest(ctx, db.ClaimAccessibleOldestParams{BoxID: boxID, AgentID: agentID, Now: now, MaxRows: max})
}

// LeaseRows leases rows locked by LockClaimable to session until expiresAt (the lease is the
// session's receipt of each row); replaced are the rows among them whose expired lease
// another session held, which keeps a receipt marked lease_replaced. The claim's result does
// not depend on these statements, so they are sent with the COMMIT, in the same round trip
// (see AckRows): call it last. A failure fails the commit. The last of them raises the
// agent's claim floor past the rows just leased (0017_claim_floor.sql).
func (t *Tx) LeaseRows(ctx context.Context, boxID, agentID, sessionID uuid.UUID, seqs []int64, replaced []LeaseHolder, expiresAt time.Time) error {
	if len(seqs) == 0 {
		return nil
	}
	if len(replaced) > 0 {
		replacedSeqs, holders := holderArrays(replaced)
		t.c.atCommit = append(t.c.atCommit, func(q *db.Queries) error {
			return q.MarkLeasesReplaced(ctx, db.MarkLeasesReplacedParams{BoxID: boxID, AgentID: agentID, InboxSeqs: replacedSeqs, SessionIds: holders})
		})
	}
	t.c.atCommit = append(t.c.atCommit, func(q *db.Queries) error {
		return q.LeaseRows(ctx, db.LeaseRowsParams{BoxID: boxID, AgentID: agentID, SessionID: sessionID, InboxSeqs: seqs, ExpiresAt: expiresAt})
	}, func(q *db.Queries) error {
		// After the leases, so the floor can pass them (0017_claim_floor.sql).
		return q.AdvanceClaimFloor(ctx, db.AdvanceClaimFloorParams{BoxID: boxID, AgentID: agentID})
	})
	return nil
}
