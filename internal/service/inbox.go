package service

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/agentbox/agentbox/gen/api"
	"github.com/agentbox/agentbox/internal/apierr"
	"github.com/agentbox/agentbox/internal/store"
)

// The inbox (SPEC §7, §9, §15): an agent's attention rows in inbox_seq order. Reads record a
// receipt per row actually returned to the session and never ACK; an ACK needs that receipt;
// claims lease rows to one session. Which rows an agent may still list, claim and ACK is one
// rule, the accessible_attention view (queries/schema/0003_inbox.sql): DM rows, and room rows
// of the agent's current active membership epoch.

// InboxList pages the caller's inbox (unread by default, or all, or acked; optionally one room
// or DM pair) with the stream semantics of SPEC §9 over inbox_seq.
func (s *Service) InboxList(ctx context.Context, req api.InboxListRequestObject) (api.InboxListResponseObject, error) {
	out, err := runRead(ctx, s, "inbox_list", func(ctx context.Context, tx *store.Tx, c *call) (api.InboxPage, error) {
		state := defaultInboxFilter
		if req.Params.Filter != nil {
			state = *req.Params.Filter
		}
		if !state.Valid() {
			return api.InboxPage{}, apierr.Invalid("filter", "must be unread, all or acked")
		}
		f := store.InboxFilter{State: string(state)}
		scope, epoch, empty := string(state)+"|", int64(0), false
		if req.Params.Destination != nil {
			dest, err := parseDestination(*req.Params.Destination, "destination")
			if err != nil {
				return api.InboxPage{}, err
			}
			if f.Channel, epoch, err = inboxChannel(ctx, tx, c, dest); err != nil {
				return api.InboxPage{}, err
			}
			scope += dest.kind + ":" + dest.id.String()
			empty = f.Channel == uuid.Nil
		}
		var pos streamPos
		if req.Params.Cursor != nil {
			if err := s.decodeCursor(ctx, c, "inbox", scope, epoch, *req.Params.Cursor, &pos); err != nil {
				return api.InboxPage{}, err
			}
		}
		if pos.Upper == 0 { // first page or resume: fix the upper bound now
			upper, err := tx.InboxUpper(ctx, c.p.BoxID, c.p.AgentID)
			if err != nil {
				return api.InboxPage{}, err
			}
			pos.Upper = max(upper, pos.After)
		}
		limit := clampLimit(req.Params.Limit, c.settings)
		var seqs []int64
		if !empty {
			var err error
			seqs, err = tx.InboxSeqs(ctx, c.p.BoxID, c.p.AgentID, f, store.SeqRange{After: pos.After, Upper: pos.Upper, Max: probe(limit)})
			if err != nil {
				return api.InboxPage{}, err
			}
		}
		complete := int64(len(seqs)) <= limit
		if !complete {
			seqs = seqs[:limit]
		}
		rows, err := tx.InboxRows(ctx, c.p.BoxID, c.p.AgentID, seqs)
		if err != nil {
			return api.InboxPage{}, err
		}
		items, err := inboxItems(c, rows)
		if err != nil {
			return api.InboxPage{}, err
		}
		var last int64 // the position a next_cursor resumes after
		if len(seqs) > 0 {
			last = seqs[len(seqs)-1]
		}
		n, err := fitBudget(items, c.settings.ResponseBudgetBytes)
		if err != nil {
			return api.InboxPage{}, err
		}
		if n < len(items) { // cut by the byte budget: never complete, never past a dropped row
			items, rows, complete, last = items[:n], rows[:n], false, rows[n-1].Seq
		}
		page := api.InboxPage{Items: items}
		if complete {
			page.ResumeCursor, err = s.encodeCursor(ctx, c, "inbox", scope, epoch, streamPos{After: pos.Upper})
		} else {
			page.NextCursor, err = s.encodeCursor(ctx, c, "inbox", scope, epoch, streamPos{After: last, Upper: pos.Upper})
		}
		if err != nil {
			return api.InboxPage{}, err
		}
		if err := tx.RecordInboxReceipts(ctx, c.p.BoxID, c.p.AgentID, c.session.ID, rowSeqs(rows)); err != nil {
			return api.InboxPage{}, err
		}
		counts, err := tx.InboxCounts(ctx, c.p.BoxID, c.p.AgentID, c.session.ID, c.now)
		page.UnreadCount, page.LeasedCount = counts.Unread, counts.Leased
		return page, err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// inboxChannel resolves an inbox_list destination filter to its channel and the epoch its
// cursors are bound to. A room needs active membership now; a DM pair without messages yet is
// uuid.Nil (an empty stream).
func inboxChannel(ctx context.Context, tx *store.Tx, c *call, d destination) (uuid.UUID, int64, error) {
	if d.kind == "room" {
		r, err := memberRoom(ctx, tx, c, d.id)
		if err != nil {
			return uuid.Nil, 0, err
		}
		return r.ID, r.Member.Epoch, nil
	}
	if d.id == c.p.AgentID {
		return uuid.Nil, 0, apierr.Invalid("destination.recipient_agent_id", "a DM pair is with another agent").WithReason("self_target")
	}
	ch, _, err := dmChannel(ctx, tx, c, d.id)
	return ch, 0, err
}

// inboxItems builds the inbox rows with their canonical messages, as seen by this session now.
func inboxItems(c *call, rows []store.InboxRow) ([]api.InboxItem, error) {
	items := make([]api.InboxItem, 0, len(rows))
	for _, r := range rows {
		visible := map[uuid.UUID]bool{}
		if parent := r.Message.ReplyTo; parent != nil {
			visible[*parent] = r.ParentVisible
			if root := r.Message.ThreadRoot; root != *parent {
				visible[root] = r.RootVisible
			}
		}
		m, err := messageDTO(r.Message, visible)
		if err != nil {
			return nil, err
		}
		item := api.InboxItem{InboxSeq: dec(r.Seq), Reasons: r.Reasons, Message: m, AckedAt: utc(r.AckedAt), AckedBySessionId: r.AckedBy}
		if r.LeaseSession != nil && r.LeaseExpiresAt != nil && r.LeaseExpiresAt.After(c.now) {
			item.LeaseExpiresAt = utc(r.LeaseExpiresAt)
			item.LeasedElsewhere = *r.LeaseSession != c.session.ID
		}
		items = append(items, item)
	}
	return items, nil
}

func rowSeqs(rows []store.InboxRow) []int64 {
	seqs := make([]int64, len(rows))
	for i, r := range rows {
		seqs[i] = r.Seq
	}
	return seqs
}

func utc(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// fitBudget is how many leading items fit in a response of budget bytes (SPEC §9): see
// itemsWithinBudget.
func fitBudget[T any](items []T, budget int64) (int, error) {
	n, _, err := itemsWithinBudget(items, budget)
	return n, err
}

// itemsWithinBudget encodes the leading items that fit in a response of budget bytes (SPEC
// §9) as a JSON array, counting each item's JSON and the page's envelope; the first item is
// always included, even above the budget, so that a stream always advances. Each item is
// encoded as compactJSON encodes it inside the page, so a page whose only field is this array
// needs no second encoding (claimPage).
func itemsWithinBudget[T any](items []T, budget int64) (int, []byte, error) {
	used := int64(pageOverheadBytes)
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // as compactJSON
	buf.WriteByte('[')
	for i, it := range items {
		end := buf.Len() // of the array so far
		if i > 0 {
			buf.WriteByte(',')
		}
		start := buf.Len()
		if err := enc.Encode(it); err != nil {
			return 0, nil, err
		}
		buf.Truncate(buf.Len() - 1) // Encode's newline
		size := buf.Len() - start
		if i == 0 {
			// Room for as many more of about its size, up to the budget.
			buf.Grow(int(min(int64(size)*int64(len(items)-1), max(budget, 0))))
		}
		used += int64(size) + 1
		if i > 0 && used > budget {
			buf.Truncate(end)
			buf.WriteByte(']')
			return i, buf.Bytes(), nil
		}
	}
	buf.WriteByte(']')
	return len(items), buf.Bytes(), nil
}

// claimRecord is a claim's idempotency record: its page with each row's key and lease and no
// message. The fields are the page's own, so a record an earlier version kept (the whole page)
// reads the same.
type claimRecord struct {
	// Session is the session the rows were leased to (absent in records written before it
	// was kept): a replay to another session shows them leased elsewhere (replayClaim).
	Session *uuid.UUID   `json:"session_id,omitempty"`
	Items   []claimedRow `json:"items"`
	// Truncated is the page's own truncated (false in records written before it was kept).
	Truncated bool `json:"truncated,omitempty"`
}

type claimedRow struct {
	InboxSeq       string    `json:"inbox_seq"`
	LeaseExpiresAt time.Time `json:"lease_expires_at"`
}

// replayClaim is a claim's replay (SPEC §10: the original result): its rows in their order,
// leased to the session until the original expiry and unread, as the claim returned them, with
// their messages read now and only the rows the agent may still read. A row of a room it has
// left or of a deleted message is left out (SPEC §5: leaving revokes reads at once; §11: no
// archive of deleted content), so the replay never shows what the caller may no longer see.
func replayClaim(ctx context.Context, tx *store.Tx, c *call, record []byte) (encodedResult, error) {
	var rec claimRecord
	if err := json.Unmarshal(record, &rec); err != nil {
		return nil, fmt.Errorf("inbox_claim: idempotency record: %w", err)
	}
	seqs := make([]int64, 0, len(rec.Items))
	for _, it := range rec.Items {
		seq, err := strconv.ParseInt(it.InboxSeq, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("inbox_claim: idempotency record: %w", err)
		}
		seqs = append(seqs, seq)
	}
	rows, err := tx.ReadableInboxRows(ctx, c.p.BoxID, c.p.AgentID, c.session.ID, seqs)
	if err != nil {
		return nil, err
	}
	bySeq := make(map[int64]store.InboxRow, len(rows))
	for _, r := range rows {
		bySeq[r.Seq] = r
	}
	holder := &c.session.ID // records written before the session was kept: the caller's
	if rec.Session != nil {
		holder = rec.Session
	}
	kept := make([]store.InboxRow, 0, len(rows))
	for i, seq := range seqs {
		if r, ok := bySeq[seq]; ok {
			r.AckedAt, r.AckedBy = nil, nil // unread when claimed
			r.LeaseSession, r.LeaseExpiresAt = holder, &rec.Items[i].LeaseExpiresAt
			kept = append(kept, r)
		}
	}
	items, err := inboxItems(c, kept)
	if err != nil {
		return nil, err
	}
	// Leased to the claiming session, which alone may ACK them: another session (a restarted
	// process retrying the claim, say) is told so rather than that it holds the leases.
	elsewhere := *holder != c.session.ID
	for i := range items { // as claimed, even if the lease has run out since (inboxItems shows live leases only)
		items[i].LeaseExpiresAt, items[i].LeasedElsewhere = utc(kept[i].LeaseExpiresAt), elsewhere
	}
	_, encoded, err := itemsWithinBudget(items, math.MaxInt64) // the claim's own page fitted its budget
	if err != nil {
		return nil, err
	}
	return claimPage(encoded, rec.Truncated), nil
}

// claimPage is the InboxClaimResult whose items are the encoded array (itemsWithinBudget),
// byte for byte what compactJSON(api.InboxClaimResult{Items: items, Truncated: truncated}) is.
func claimPage(items []byte, truncated bool) encodedResult {
	page := append(append([]byte(`{"items":`), items...), `,"truncated":`...)
	return encodedResult(append(strconv.AppendBool(page, truncated), '}'))
}

// InboxAck marks explicit rows read (SPEC §7). Every row must be the caller's, still
// accessible, returned to this session, and not leased by another session; one invalid
// member rejects the whole batch and ACKs nothing. Valid rows report acked, or already_acked
// with the first ACK's session and time.
func (s *Service) InboxAck(ctx context.Context, req api.InboxAckRequestObject) (api.InboxAckResponseObject, error) {
	in := *req.Body
	m := mutation{op: "inbox_ack", idempotencyKey: in.IdempotencyKey, args: map[string]any{"inbox_seqs": canonicalDecs(in.InboxSeqs)}}
	out, err := runMutation(ctx, s, m, func(ctx context.Context, tx *store.Tx, c *call) (api.InboxAckResult, error) {
		seqs, err := ackSeqs(in.InboxSeqs, c.settings.AckBatchMax)
		if err != nil {
			return api.InboxAckResult{}, err
		}
		rows, err := tx.LockAckCandidates(ctx, c.p.BoxID, c.p.AgentID, c.session.ID, seqs)
		if err != nil {
			return api.InboxAckResult{}, err
		}
		results := make([]api.AckOutcome, len(seqs))
		var toAck []int64
		var ended []store.LeaseHolder
		at := c.now.Truncate(time.Microsecond) // as stored, so a later already_acked shows the same time
		for i, seq := range seqs {
			field := fieldIndex("inbox_seqs", i)
			r, ok := rows[seq]
			switch {
			case !ok || !r.Returned: // unknown rows look the same
				return api.InboxAckResult{}, apierr.Invalid(field, "the row was not returned to this session by inbox_list, inbox_claim or a history read, or is no longer in the inbox").
					WithReason("not_returned_to_session")
			case !r.Accessible: // shown to this session, so saying so tells it nothing new
				return api.InboxAckResult{}, apierr.Invalid(field, "the agent can no longer read this row: it left the room, or the row predates its current membership").
					WithReason("not_accessible").WithSuggestion("drop the row; inbox_list shows the rows left to acknowledge")
			case r.AckedAt != nil:
				results[i] = api.AckOutcome{InboxSeq: dec(seq), Status: api.AckStatusAlreadyAcked, AckedAt: r.AckedAt.UTC(), AckedBySessionId: *r.AckedBy}
				continue
			case r.LeaseReplaced:
				return api.InboxAckResult{}, apierr.Invalid(field, "this session's lease expired and another session claimed the row").
					WithReason("lease_replaced").WithSuggestion("claim the row again with inbox_claim before acknowledging it")
			case r.LeaseSession != nil && *r.LeaseSession != c.session.ID && r.LeaseExpiresAt.After(c.now):
				return api.InboxAckResult{}, apierr.Invalid(field, "another session of this agent holds a live lease on the row").
					WithReason("leased_elsewhere")
			}
			toAck = append(toAck, seq)
			if r.LeaseSession != nil && *r.LeaseSession != c.session.ID { // an expired lease this ACK ends
				ended = append(ended, store.LeaseHolder{Seq: seq, Session: *r.LeaseSession})
			}
			results[i] = api.AckOutcome{InboxSeq: dec(seq), Status: api.AckStatusAcked, AckedAt: at.UTC(), AckedBySessionId: c.session.ID}
		}
		return api.InboxAckResult{Results: results}, tx.AckRows(ctx, c.p.BoxID, c.p.AgentID, c.session.ID, toAck, ended, at)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ackSeqs parses an ACK batch: 1..ack_batch_max distinct inbox_seqs.
func ackSeqs(in []string, batchMax int64) ([]int64, error) {
	switch {
	case len(in) == 0:
		return nil, apierr.Invalid("inbox_seqs", "name at least one inbox_seq")
	case int64(len(in)) > batchMax:
		return nil, apierr.TooLarge("inbox_seqs", "too_many_inbox_seqs", batchMax)
	}
	seqs := make([]int64, len(in))
	seen := make(map[int64]bool, len(in))
	for i, raw := range in {
		v, err := parseDec(fieldIndex("inbox_seqs", i), raw)
		if err != nil {
			return nil, err
		}
		if seen[v] {
			return nil, apierr.Invalid(fieldIndex("inbox_seqs", i), "each inbox_seq may be named once").WithReason("duplicate_inbox_seq")
		}
		seen[v] = true
		seqs[i] = v
	}
	return seqs, nil
}

// InboxClaim leases up to limit accessible unread rows that no live lease holds to this
// session (SPEC §7). Concurrent claims skip each other's rows, so no row is leased twice; the
// rows leased are exactly the rows returned (the byte budget bounds how many).
func (s *Service) InboxClaim(ctx context.Context, req api.InboxClaimRequestObject) (api.InboxClaimResponseObject, error) {
	in := *req.Body
	args := in
	args.IdempotencyKey = ""
	if args.Order != nil && *args.Order == defaultClaimOrder { // the default, named, is the default
		args.Order = nil
	}
	var claimed claimRecord // what the idempotency record keeps: the rows' keys and lease, no content
	m := mutation{op: "inbox_claim", idempotencyKey: in.IdempotencyKey, args: args,
		record: func() ([]byte, error) { return json.Marshal(claimed) },
		replay: func(ctx context.Context, tx *store.Tx, c *call, record []byte) (any, error) {
			return replayClaim(ctx, tx, c, record)
		}}
	out, err := runMutation(ctx, s, m, func(ctx context.Context, tx *store.Tx, c *call) (encodedResult, error) {
		order := defaultClaimOrder
		if in.Order != nil {
			order = *in.Order
		}
		if !order.Valid() {
			return nil, apierr.Invalid("order", "must be oldest or newest")
		}
		lease := c.settings.LeaseDefaultSeconds
		if in.LeaseSeconds != nil {
			lease = *in.LeaseSeconds
		}
		lease = min(max(lease, 1), c.settings.LeaseMaxSeconds)
		limit := clampLimit(in.Limit, c.settings)
		seqs, err := tx.LockClaimable(ctx, c.p.BoxID, c.p.AgentID, order == api.ClaimOrderNewest, int32(min(limit, 1<<30)), c.now)
		if err != nil {
			return nil, err
		}
		// Only the locked rows the agent may still read, judged after the locks are held: a
		// room left meanwhile leases nothing (store.ReadableInboxRows says why).
		rows, err := tx.ReadableInboxRows(ctx, c.p.BoxID, c.p.AgentID, c.session.ID, seqs)
		if err != nil {
			return nil, err
		}
		if order == api.ClaimOrderNewest { // InboxRows returns ascending
			for i, j := 0, len(rows)-1; i < j; i, j = i+1, j-1 {
				rows[i], rows[j] = rows[j], rows[i]
			}
		}
		expires := c.now.Add(time.Duration(lease) * time.Second).Truncate(time.Microsecond) // as stored
		// The sessions whose expired leases the claim takes over.
		formerHolders := make([]*uuid.UUID, len(rows))
		for i := range rows {
			if h := rows[i].LeaseSession; h != nil && *h != c.session.ID {
				formerHolders[i] = h
			}
			rows[i].LeaseSession, rows[i].LeaseExpiresAt = &c.session.ID, &expires
		}
		items, err := inboxItems(c, rows)
		if err != nil {
			return nil, err
		}
		n, encoded, err := itemsWithinBudget(items, c.settings.ResponseBudgetBytes)
		if err != nil {
			return nil, err
		}
		// A page the budget cut says so (SPEC §9: a truncated page never looks complete): the
		// rows past it are not leased, and a caller that asked for more claims again.
		claimed.Truncated = n < len(rows)
		rows = rows[:n]
		claimed.Items = make([]claimedRow, n)
		if n > 0 { // an empty answer is as true for any session
			claimed.Session = &c.session.ID
		}
		for i, r := range rows {
			claimed.Items[i] = claimedRow{InboxSeq: dec(r.Seq), LeaseExpiresAt: expires}
		}
		var replaced []store.LeaseHolder
		for i, h := range formerHolders[:n] {
			if h != nil {
				replaced = append(replaced, store.LeaseHolder{Seq: rows[i].Seq, Session: *h})
			}
		}
		return claimPage(encoded, claimed.Truncated), tx.LeaseRows(ctx, c.p.BoxID, c.p.AgentID, c.session.ID, rowSeqs(rows), replaced, expires)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
