package service

import (
	"context"
	"math"
	"strings"

	"github.com/google/uuid"

	"github.com/agentbox/agentbox/gen/api"
	"github.com/agentbox/agentbox/internal/apierr"
	"github.com/agentbox/agentbox/internal/store"
)

// History reads (SPEC §6, §9): message_get, conversation_read, thread_read, thread_export.
// They never ACK; message_get and conversation_read record receipts for the caller's own
// attention rows among the messages actually returned.

// pageOverheadBytes is reserved in every byte budget for the response's envelope and cursors.
const pageOverheadBytes = 512

// streamPos is a stream cursor position: rows above After, up to the fixed Upper. A resume
// cursor has Upper 0: the next poll captures a new upper bound.
type streamPos struct {
	After int64 `json:"after"`
	Upper int64 `json:"upper,omitempty"`
}

// MessageGet returns one message the caller may read now.
func (s *Service) MessageGet(ctx context.Context, req api.MessageGetRequestObject) (api.MessageGetResponseObject, error) {
	out, err := runRead(ctx, s, "message_get", func(ctx context.Context, tx *store.Tx, c *call) (api.Message, error) {
		m, v, err := readableMessage(ctx, tx, c, req.MessageId)
		if err != nil {
			return api.Message{}, err
		}
		dtos, err := messageDTOs(ctx, tx, c, v, []store.Message{m})
		if err != nil {
			return api.Message{}, err
		}
		return dtos[0], tx.RecordReceipts(ctx, c.p.BoxID, c.p.AgentID, c.session.ID, []uuid.UUID{m.ID})
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ConversationRead pages a room (within the caller's authorized epoch) or the caller's DM
// pair with one agent, in ascending message_seq, with the stream semantics of SPEC §9.
func (s *Service) ConversationRead(ctx context.Context, req api.ConversationReadRequestObject) (api.ConversationReadResponseObject, error) {
	out, err := runRead(ctx, s, "conversation_read", func(ctx context.Context, tx *store.Tx, c *call) (api.MessagePage, error) {
		dest, err := parseDestination(req.Params.Destination, "destination")
		if err != nil {
			return api.MessagePage{}, err
		}
		v, filter, head, err := conversationView(ctx, tx, c, dest)
		if err != nil {
			return api.MessagePage{}, err
		}
		pos := streamPos{After: v.floor}
		if req.Params.Cursor != nil {
			if err := s.decodeCursor(ctx, c, "conversation", filter, v.epoch, *req.Params.Cursor, &pos); err != nil {
				return api.MessagePage{}, err
			}
			pos.After = max(pos.After, v.floor)
		}
		if pos.Upper == 0 { // first page or resume: fix the upper bound now
			pos.Upper = head
		}
		limit := clampLimit(req.Params.Limit, c.settings)
		var rows []store.Message
		if v.channelID != uuid.Nil {
			rows, err = tx.ChannelMessages(ctx, c.p.BoxID, v.channelID, store.SeqRange{After: pos.After, Upper: pos.Upper, Max: probe(limit)})
			if err != nil {
				return api.MessagePage{}, err
			}
		}
		items, complete, err := budgetPage(ctx, tx, c, v, rows, limit)
		if err != nil {
			return api.MessagePage{}, err
		}
		page := api.MessagePage{Items: items}
		if complete {
			page.ResumeCursor, err = s.encodeCursor(ctx, c, "conversation", filter, v.epoch, streamPos{After: pos.Upper})
		} else {
			last, _ := parseDec("message_seq", items[len(items)-1].MessageSeq)
			page.NextCursor, err = s.encodeCursor(ctx, c, "conversation", filter, v.epoch, streamPos{After: last, Upper: pos.Upper})
		}
		if err != nil {
			return api.MessagePage{}, err
		}
		return page, recordReceipts(ctx, tx, c, items)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// conversationView authorizes a conversation and returns the caller's view, the cursor filter
// and the channel's committed head. A room needs active membership (a pending invitee gets
// reason not_a_member). A DM pair that has no message yet is an empty stream with no channel.
func conversationView(ctx context.Context, tx *store.Tx, c *call, d destination) (channelView, string, int64, error) {
	if d.kind == "room" {
		r, err := memberRoom(ctx, tx, c, d.id)
		if err != nil {
			return channelView{}, "", 0, err
		}
		head, err := tx.ChannelHead(ctx, c.p.BoxID, r.ID)
		return roomView(r), "room:" + r.ID.String(), head, err
	}
	if d.id == c.p.AgentID {
		return channelView{}, "", 0, apierr.Invalid("destination.recipient_agent_id", "a DM conversation is with another agent").WithReason("self_target")
	}
	filter := "dm:" + d.id.String()
	ch, head, err := dmChannel(ctx, tx, c, d.id)
	return channelView{channelID: ch}, filter, head, err
}

// dmChannel is the caller's DM channel with peer and its committed head; uuid.Nil for a pair
// with no message yet, which is an empty stream only with an enabled agent of the box: any
// other peer (unknown, disabled, of another box) is the NOT_FOUND_OR_FORBIDDEN message_send
// answers, so a mistyped ID is not read as a conversation that is merely quiet. A pair with
// history stays readable whatever the peer's state (SPEC §6: the caller's own DM pair).
func dmChannel(ctx context.Context, tx *store.Tx, c *call, peer uuid.UUID) (uuid.UUID, int64, error) {
	ch, head, err := tx.DMChannelHead(ctx, c.p.BoxID, c.p.AgentID, peer)
	if err != store.ErrNotFound {
		return ch, head, err
	}
	enabled, err := tx.AgentEnabled(ctx, c.p.BoxID, peer)
	switch {
	case err != nil:
		return uuid.Nil, 0, err
	case !enabled:
		return uuid.Nil, 0, apierr.NotFound().WithField("destination.recipient_agent_id")
	}
	return uuid.Nil, 0, nil
}

// probe is the row count a page reads: one more than it returns, to tell "exactly full and
// exhausted" from "more to come".
func probe(limit int64) int32 { return int32(min(limit, math.MaxInt32-1) + 1) }

// budgetPage turns up to limit rows into DTOs within the response byte budget. complete is
// true when the rows were exhausted: nothing beyond the page's last row up to the upper bound
// remains. A page cut by the limit or the budget is never complete (its cursor stays at the
// last returned row, so no row is skipped). The first row is always returned, even above the
// budget, so that a stream always advances.
func budgetPage(ctx context.Context, tx *store.Tx, c *call, v channelView, rows []store.Message, limit int64) ([]api.Message, bool, error) {
	complete := int64(len(rows)) <= limit
	if !complete {
		rows = rows[:limit]
	}
	dtos, err := messageDTOs(ctx, tx, c, v, rows)
	if err != nil {
		return nil, false, err
	}
	return withinBudget(c, dtos, complete)
}

// recordReceipts records receipts for the returned messages the caller has attention rows for.
func recordReceipts(ctx context.Context, tx *store.Tx, c *call, items []api.Message) error {
	ids := make([]uuid.UUID, len(items))
	for i, m := range items {
		ids[i] = m.MessageId
	}
	return tx.RecordReceipts(ctx, c.p.BoxID, c.p.AgentID, c.session.ID, ids)
}

// ThreadRead pages the thread family of an anchor (root and replies) that the caller may see,
// in message_seq order (a keyset, not a stream: no resume cursor); hidden or purged ancestors
// are redacted and purged messages leave gaps. Receipts as conversation_read.
func (s *Service) ThreadRead(ctx context.Context, req api.ThreadReadRequestObject) (api.ThreadReadResponseObject, error) {
	out, err := runRead(ctx, s, "thread_read", func(ctx context.Context, tx *store.Tx, c *call) (api.ThreadPage, error) {
		m, v, err := readableMessage(ctx, tx, c, req.MessageId) // the anchor must be readable now
		if err != nil {
			return api.ThreadPage{}, err
		}
		filter := "thread:" + m.ThreadRoot.String()
		pos := streamPos{After: v.floor}
		if req.Params.Cursor != nil {
			if err := s.decodeCursor(ctx, c, "thread", filter, v.epoch, *req.Params.Cursor, &pos); err != nil {
				return api.ThreadPage{}, err
			}
			pos.After = max(pos.After, v.floor)
		}
		limit := clampLimit(req.Params.Limit, c.settings)
		rows, err := tx.ThreadMessages(ctx, c.p.BoxID, v.channelID, m.ThreadRoot, store.SeqRange{After: pos.After, Upper: math.MaxInt64, Max: probe(limit)})
		if err != nil {
			return api.ThreadPage{}, err
		}
		items, complete, err := budgetPage(ctx, tx, c, v, rows, limit)
		if err != nil {
			return api.ThreadPage{}, err
		}
		page := api.ThreadPage{Items: items}
		if !complete {
			last, _ := parseDec("message_seq", items[len(items)-1].MessageSeq)
			if page.NextCursor, err = s.encodeCursor(ctx, c, "thread", filter, v.epoch, streamPos{After: last}); err != nil {
				return api.ThreadPage{}, err
			}
		}
		return page, recordReceipts(ctx, tx, c, items)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ThreadExport returns an authorized chunk of a thread as json (a JSON array of canonical
// messages) or markdown, within the response byte budget. The first chunk fixes the upper
// bound; while rows remain up to it the chunk is partial with a next_cursor. Every chunk
// holds whole messages (a single message larger than the budget is returned alone).
func (s *Service) ThreadExport(ctx context.Context, req api.ThreadExportRequestObject) (api.ThreadExportResponseObject, error) {
	out, err := runRead(ctx, s, "thread_export", func(ctx context.Context, tx *store.Tx, c *call) (api.ThreadExport, error) {
		format := api.ExportFormat(req.Params.Format)
		if format != api.ExportFormatJson && format != api.ExportFormatMarkdown {
			return api.ThreadExport{}, apierr.Invalid("format", "must be json or markdown")
		}
		m, v, err := readableMessage(ctx, tx, c, req.MessageId) // the anchor must be readable now
		if err != nil {
			return api.ThreadExport{}, err
		}
		filter := "thread:" + m.ThreadRoot.String() + ":" + string(format)
		pos := streamPos{After: v.floor}
		if req.Params.Cursor != nil {
			if err := s.decodeCursor(ctx, c, "thread_export", filter, v.epoch, *req.Params.Cursor, &pos); err != nil {
				return api.ThreadExport{}, err
			}
			pos.After = max(pos.After, v.floor)
		}
		if pos.Upper == 0 {
			if pos.Upper, err = tx.ChannelHead(ctx, c.p.BoxID, v.channelID); err != nil {
				return api.ThreadExport{}, err
			}
		}
		limit := c.settings.PageLimitMax
		rows, err := tx.ThreadMessages(ctx, c.p.BoxID, v.channelID, m.ThreadRoot, store.SeqRange{After: pos.After, Upper: pos.Upper, Max: probe(limit)})
		if err != nil {
			return api.ThreadExport{}, err
		}
		complete := int64(len(rows)) <= limit
		if !complete {
			rows = rows[:limit]
		}
		dtos, err := messageDTOs(ctx, tx, c, v, rows)
		if err != nil {
			return api.ThreadExport{}, err
		}
		chunk, n, err := exportChunk(format, dtos, c.settings.ResponseBudgetBytes-pageOverheadBytes)
		if err != nil {
			return api.ThreadExport{}, err
		}
		res := api.ThreadExport{Format: format, Content: chunk, ItemCount: int64(n), Partial: !complete || n < len(dtos)}
		if res.Partial {
			last, _ := parseDec("message_seq", dtos[n-1].MessageSeq)
			res.NextCursor, err = s.encodeCursor(ctx, c, "thread_export", filter, v.epoch, streamPos{After: last, Upper: pos.Upper})
		} else {
			// The exhausting chunk: a later export with this cursor finds newer replies.
			res.ResumeCursor, err = s.encodeCursor(ctx, c, "thread_export", filter, v.epoch, streamPos{After: pos.Upper})
		}
		return res, err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// exportChunk renders as many leading messages as fit in budget bytes of JSON-escaped content
// (at least one) and returns the content and how many messages it holds.
func exportChunk(format api.ExportFormat, ms []api.Message, budget int64) (string, int, error) {
	var parts []string
	used := int64(0)
	for i, m := range ms {
		var part string
		if format == api.ExportFormatJson {
			raw, err := compactJSON(m)
			if err != nil {
				return "", 0, err
			}
			part = string(raw)
		} else {
			part = markdownMessage(m)
		}
		cost := escapedLen(part) + 1 // separator or bracket
		if i > 0 && used+cost+2 > budget {
			break
		}
		used += cost
		parts = append(parts, part)
	}
	if format == api.ExportFormatJson {
		return "[" + strings.Join(parts, ",") + "]", len(parts), nil
	}
	return strings.Join(parts, "\n"), len(parts), nil
}

// escapedLen is the byte length of s inside a JSON string on the wire.
func escapedLen(s string) int64 {
	raw, _ := compactJSON(s)
	return int64(len(raw) - 2)
}

// markdownMessage renders one message for a markdown export: a heading the server writes
// (sender, time, sequence, IDs: from the stored message, never from its content), then what
// the sender wrote — body, file references, payload — quoted line by line ("> "), so no
// content can read as another entry of the transcript (outside probe: a body holding the
// heading syntax forged a message "from" another agent).
func markdownMessage(m api.Message) string {
	var b strings.Builder
	b.WriteString("### " + m.Sender.Name + " · " + m.CreatedAt.UTC().Format("2006-01-02T15:04:05Z07:00") + " · #" + m.MessageSeq + "\n")
	b.WriteString("message_id: " + m.MessageId.String())
	switch {
	case m.ReplyToMessageId != nil:
		b.WriteString(" · reply to " + m.ReplyToMessageId.String())
	case m.ReplyToRedacted != nil && *m.ReplyToRedacted:
		b.WriteString(" · reply to a message not shown")
	}
	b.WriteString("\n\n")
	var content strings.Builder
	content.WriteString(m.BodyMd + "\n")
	if len(m.Files) > 0 {
		content.WriteString("\nFiles:\n")
		for _, f := range m.Files {
			content.WriteString("- " + f.DisplayName + " <" + f.Url + ">")
			switch {
			case f.VersionLabel != nil:
				content.WriteString(" version " + *f.VersionLabel)
			case f.Commit != nil:
				content.WriteString(" commit " + *f.Commit)
			case f.Sha256 != nil:
				content.WriteString(" sha256 " + *f.Sha256)
			default:
				content.WriteString(" (unversioned)")
			}
			content.WriteString("\n")
		}
	}
	if m.Payload != nil {
		content.WriteString("\nPayload: `" + string(*m.Payload) + "`\n")
	}
	b.WriteString(quoteLines(content.String()))
	return b.String()
}

// quoteLines quotes every line of s as a markdown block quote. A line ends at \n, \r\n or a
// lone \r, as markdown reads them (CommonMark §2.1), so no line of s escapes the quote.
func quoteLines(s string) string {
	s = strings.TrimSuffix(strings.ReplaceAll(strings.ReplaceAll(s, "\r\n", "\n"), "\r", "\n"), "\n")
	var b strings.Builder
	for line := range strings.SplitSeq(s, "\n") {
		if line == "" {
			b.WriteString(">\n")
		} else {
			b.WriteString("> " + line + "\n")
		}
	}
	return b.String()
}
