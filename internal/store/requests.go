package store

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/agentbox/agentbox/gen/db"
)

// Request is one recipient's current declaration on a request message (SPEC §8).
type Request struct {
	MessageID      uuid.UUID
	MessageSeq     int64
	RequesterID    uuid.UUID
	RecipientID    uuid.UUID
	Status         string // pending | accepted | needs_context | declined | result_ready
	Revision       int64
	UpdatedAt      time.Time
	ReplyMessageID *uuid.UUID
}

func requestFrom(r db.Request) Request {
	return Request{MessageID: r.MessageID, MessageSeq: r.MessageSeq, RequesterID: r.RequesterAgentID, RecipientID: r.RecipientAgentID,
		Status: r.Status, Revision: r.Revision, UpdatedAt: r.UpdatedAt, ReplyMessageID: r.ReplyMessageID}
}

func requestsFrom(rows []db.Request, err error) ([]Request, error) {
	out := make([]Request, 0, len(rows))
	for _, r := range rows {
		out = append(out, requestFrom(r))
	}
	return out, err
}

// RequestOf is recipient's request on a message; ErrNotFound when it was not requested.
func (t *Tx) RequestOf(ctx context.Context, boxID, messageID, recipient uuid.UUID) (Request, error) {
	r, err := one(t.q.GetRequest(ctx, db.GetRequestParams{BoxID: boxID, MessageID: messageID, RecipientAgentID: recipient}))
	return requestFrom(r), err
}

// Declaration is a new request status with the reply that announces it.
type Declaration struct {
	Status         string
	ReplyMessageID uuid.UUID
}

// DeclareRequest is a compare-and-set of recipient's declaration: revision+1, updated_at and
// the reply. ok is false when expected is stale.
func (t *Tx) DeclareRequest(ctx context.Context, boxID, messageID, recipient uuid.UUID, expected int64, d Declaration, now time.Time) (Request, bool, error) {
	r, err := one(t.q.RespondRequest(ctx, db.RespondRequestParams{BoxID: boxID, MessageID: messageID, RecipientAgentID: recipient,
		ExpectedRevision: expected, Status: d.Status, ReplyMessageID: &d.ReplyMessageID, Now: now}))
	if err == ErrNotFound {
		return Request{}, false, nil
	}
	return requestFrom(r), err == nil, err
}

// RequestKey is a keyset position in a request listing.
type RequestKey struct {
	Seq       int64
	Recipient uuid.UUID
}

// IncomingRequests pages the agent's incoming requests whose message it may still see, after
// the given message_seq, optionally of one status.
func (t *Tx) IncomingRequests(ctx context.Context, boxID, agentID uuid.UUID, status *string, after RequestKey, max int32) ([]Request, error) {
	return requestsFrom(t.q.IncomingRequests(ctx, db.IncomingRequestsParams{BoxID: boxID, AgentID: agentID, AfterSeq: after.Seq,
		Status: status, MaxRows: max}))
}

// OutgoingRequests pages the agent's outgoing requests whose message it may still see, after
// the (message_seq, recipient) key, optionally of one status.
func (t *Tx) OutgoingRequests(ctx context.Context, boxID, agentID uuid.UUID, status *string, after RequestKey, max int32) ([]Request, error) {
	return requestsFrom(t.q.OutgoingRequests(ctx, db.OutgoingRequestsParams{BoxID: boxID, AgentID: agentID, AfterSeq: after.Seq,
		AfterRecipient: after.Recipient, Status: status, MaxRows: max}))
}

// PendingIncomingRequests counts the agent's pending incoming requests whose message it may still see.
func (t *Tx) PendingIncomingRequests(ctx context.Context, boxID, agentID uuid.UUID) (int64, error) {
	return t.q.PendingIncomingRequests(ctx, db.PendingIncomingRequestsParams{BoxID: boxID, AgentID: agentID})
}

// FileReport is one reporter's access report on one file reference of a message.
type FileReport struct {
	MessageID  uuid.UUID
	FileIndex  int
	ReporterID uuid.UUID
	Status     string // accessible | denied | not_found | error
	Note       string
	UpdatedAt  time.Time
}

func fileReportFrom(r db.FileReport) FileReport {
	return FileReport{MessageID: r.MessageID, FileIndex: int(r.FileIndex), ReporterID: r.ReporterAgentID, Status: r.Status,
		Note: r.Note, UpdatedAt: r.UpdatedAt}
}

// UpsertFileReport stores the reporter's report on (message, file index), replacing its last one.
func (t *Tx) UpsertFileReport(ctx context.Context, boxID uuid.UUID, r FileReport) (FileReport, error) {
	row, err := t.q.UpsertFileReport(ctx, db.UpsertFileReportParams{BoxID: boxID, MessageID: r.MessageID, FileIndex: int32(r.FileIndex),
		ReporterAgentID: r.ReporterID, Status: r.Status, Note: r.Note, Now: r.UpdatedAt})
	return fileReportFrom(row), err
}

// FileReportKey is a keyset position in a file report listing.
type FileReportKey struct {
	FileIndex int
	Reporter  uuid.UUID
}

// FileReports pages the reports on a message after the key; only reporter's when reporter is not nil.
func (t *Tx) FileReports(ctx context.Context, boxID, messageID uuid.UUID, reporter *uuid.UUID, after FileReportKey, max int32) ([]FileReport, error) {
	rows, err := t.q.FileReports(ctx, db.FileReportsParams{BoxID: boxID, MessageID: messageID, ReporterAgentID: reporter,
		AfterIndex: int32(after.FileIndex), AfterReporter: after.Reporter, MaxRows: max})
	out := make([]FileReport, 0, len(rows))
	for _, r := range rows {
		out = append(out, fileReportFrom(r))
	}
	return out, err
}
