package service

import (
	"context"
	"encoding/json"

	"github.com/google/uuid"

	"github.com/agentbox/agentbox/gen/api"
	"github.com/agentbox/agentbox/internal/apierr"
	"github.com/agentbox/agentbox/internal/store"
)

// File access reports (SPEC §8): a recipient of a message says whether it could open one of
// the message's file references. Nothing here fetches anything; a report is the reporter's
// word, upserted per (message, file index, reporter), independent of ACK and work state.

func fileReportDTO(r store.FileReport) api.FileReport {
	out := api.FileReport{MessageId: r.MessageID, FileIndex: r.FileIndex, ReporterAgentId: r.ReporterID,
		Status: api.FileAccessStatus(r.Status), UpdatedAt: r.UpdatedAt.UTC()}
	if r.Note != "" {
		note := r.Note
		out.Note = &note
	}
	return out
}

// FileAccessReport records the caller's access to one file reference of a message it is
// authorized to now (a DM participant, or an active room member above its read floor). The
// author cannot report on its own message.
func (s *Service) FileAccessReport(ctx context.Context, req api.FileAccessReportRequestObject) (api.FileAccessReportResponseObject, error) {
	in := *req.Body
	args := in
	args.IdempotencyKey = ""
	m := mutation{op: "file_access_report", idempotencyKey: in.IdempotencyKey,
		args: map[string]any{"message_id": req.MessageId, "file_index": req.FileIndex, "input": args}}
	out, err := runMutation(ctx, s, m, func(ctx context.Context, tx *store.Tx, c *call) (api.FileReport, error) {
		if !in.Status.Valid() {
			return api.FileReport{}, apierr.Invalid("status", "must be accessible, denied, not_found or error")
		}
		note := deref(in.Note)
		if len(note) > FileNoteMaxBytes {
			return api.FileReport{}, apierr.TooLong("note", int64(FileNoteMaxBytes))
		}
		msg, _, err := readableMessage(ctx, tx, c, req.MessageId)
		if err != nil {
			return api.FileReport{}, err
		}
		if msg.SenderID == c.p.AgentID {
			return api.FileReport{}, apierr.Forbidden("author_cannot_report")
		}
		var files []json.RawMessage
		if len(msg.Files) > 0 {
			if err := json.Unmarshal(msg.Files, &files); err != nil {
				return api.FileReport{}, err
			}
		}
		if req.FileIndex < 0 || req.FileIndex >= len(files) {
			return api.FileReport{}, apierr.Invalid("file_index", "the message has no file reference at this index").WithReason("no_such_file")
		}
		r, err := tx.UpsertFileReport(ctx, c.p.BoxID, store.FileReport{MessageID: msg.ID, FileIndex: req.FileIndex,
			ReporterID: c.p.AgentID, Status: string(in.Status), Note: note, UpdatedAt: c.now})
		return fileReportDTO(r), err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// fileReportPos is a file report listing cursor position (keyset on file_index, reporter).
type fileReportPos struct {
	FileIndex int       `json:"file_index"`
	Reporter  uuid.UUID `json:"reporter"`
}

// FileReportList pages the reports on a message the caller may read now: the author sees
// every report, any other caller only its own. No report means not reported, never
// accessible. No fetch, no receipt.
func (s *Service) FileReportList(ctx context.Context, req api.FileReportListRequestObject) (api.FileReportListResponseObject, error) {
	out, err := runRead(ctx, s, "file_report_list", func(ctx context.Context, tx *store.Tx, c *call) (api.FileReportPage, error) {
		msg, v, err := readableMessage(ctx, tx, c, req.MessageId)
		if err != nil {
			return api.FileReportPage{}, err
		}
		var only *uuid.UUID
		scope := msg.ID.String() + "|all"
		if msg.SenderID != c.p.AgentID {
			only, scope = &c.p.AgentID, msg.ID.String()+"|own"
		}
		pos := fileReportPos{FileIndex: -1}
		if req.Params.Cursor != nil {
			if err := s.decodeCursor(ctx, c, "file_reports", scope, v.epoch, *req.Params.Cursor, &pos); err != nil {
				return api.FileReportPage{}, err
			}
		}
		limit := clampLimit(req.Params.Limit, c.settings)
		rows, err := tx.FileReports(ctx, c.p.BoxID, msg.ID, only, store.FileReportKey{FileIndex: pos.FileIndex, Reporter: pos.Reporter}, probe(limit))
		if err != nil {
			return api.FileReportPage{}, err
		}
		items, next, err := keysetPage(ctx, s, c, rows, limit, fileReportDTO, listScope{stream: "file_reports", filter: scope, epoch: v.epoch},
			func(r store.FileReport) any { return fileReportPos{FileIndex: r.FileIndex, Reporter: r.ReporterID} })
		return api.FileReportPage{Items: items, NextCursor: next}, err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
