package service

import (
	"context"

	"github.com/google/uuid"

	"github.com/agentbox/agentbox/gen/api"
	"github.com/agentbox/agentbox/internal/apierr"
	"github.com/agentbox/agentbox/internal/store"
)

// Response requests (SPEC §8). A send creates one pending request per requested recipient;
// the recipient declares a status by compare-and-set on the request's revision, and every
// declaration posts exactly one canonical reply to the request message in the same
// transaction. Statuses are declarations, not verified state.

func requestDTO(r store.Request) api.Request {
	return api.Request{RequestMessageId: r.MessageID, MessageSeq: dec(r.MessageSeq), RequesterAgentId: r.RequesterID,
		RecipientAgentId: r.RecipientID, Status: api.RequestStatus(r.Status), Revision: dec(r.Revision),
		UpdatedAt: r.UpdatedAt.UTC(), ReplyMessageId: r.ReplyMessageID}
}

// requestPos is a request listing cursor position (keyset on message_seq, recipient).
type requestPos struct {
	Seq       int64     `json:"seq"`
	Recipient uuid.UUID `json:"recipient"`
}

// RequestList pages the caller's incoming (recipient = caller) or outgoing (requester =
// caller) requests with their current declarations, in (message_seq, recipient) order, while
// their message is visible to the caller. A browser: start fresh to see corrected declarations.
func (s *Service) RequestList(ctx context.Context, req api.RequestListRequestObject) (api.RequestListResponseObject, error) {
	out, err := runRead(ctx, s, "request_list", func(ctx context.Context, tx *store.Tx, c *call) (api.RequestPage, error) {
		dir := req.Params.Direction
		if !dir.Valid() {
			return api.RequestPage{}, apierr.Invalid("direction", "must be incoming or outgoing")
		}
		var status *string
		scope := string(dir) + "|"
		if req.Params.Status != nil {
			if !req.Params.Status.Valid() {
				return api.RequestPage{}, apierr.Invalid("status", "must be a request status")
			}
			st := string(*req.Params.Status)
			status, scope = &st, scope+st
		}
		var pos requestPos
		if req.Params.Cursor != nil {
			if err := s.decodeCursor(ctx, c, "requests", scope, 0, *req.Params.Cursor, &pos); err != nil {
				return api.RequestPage{}, err
			}
		}
		limit := clampLimit(req.Params.Limit, c.settings)
		after := store.RequestKey{Seq: pos.Seq, Recipient: pos.Recipient}
		var rows []store.Request
		var err error
		if dir == api.RequestDirectionIncoming {
			rows, err = tx.IncomingRequests(ctx, c.p.BoxID, c.p.AgentID, status, after, probe(limit))
		} else {
			rows, err = tx.OutgoingRequests(ctx, c.p.BoxID, c.p.AgentID, status, after, probe(limit))
		}
		if err != nil {
			return api.RequestPage{}, err
		}
		items, next, err := keysetPage(ctx, s, c, rows, limit, requestDTO, listScope{stream: "requests", filter: scope},
			func(r store.Request) any { return requestPos{Seq: r.MessageSeq, Recipient: r.RecipientID} })
		return api.RequestPage{Items: items, NextCursor: next}, err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// RequestRespond declares the caller's status on a request addressed to it and posts one
// canonical reply, atomically (SPEC §8).
func (s *Service) RequestRespond(ctx context.Context, req api.RequestRespondRequestObject) (api.RequestRespondResponseObject, error) {
	in := *req.Body
	dryRun := deref(in.DryRun)
	args := in
	args.IdempotencyKey, args.DryRun = "", nil
	args.Files = emptyAsAbsent(args.Files)
	args.ExpectedRevision = canonicalDec(args.ExpectedRevision)
	m := mutation{op: "request_respond", idempotencyKey: in.IdempotencyKey, dryRun: dryRun,
		args: map[string]any{"request_message_id": req.RequestMessageId, "input": args}}
	out, err := runMutation(ctx, s, m, func(ctx context.Context, tx *store.Tx, c *call) (api.RequestRespondResult, error) {
		res, err := s.respond(ctx, tx, c, req.RequestMessageId, in)
		if err != nil || !dryRun {
			return res, err
		}
		// Everything ran and is rolled back: the would-be declaration, without the reply's IDs.
		res.Request.ReplyMessageId, res.Reply, res.DryRun = nil, nil, &dryRun
		return res, nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (s *Service) respond(ctx context.Context, tx *store.Tx, c *call, id uuid.UUID, in api.RequestRespondInput) (api.RequestRespondResult, error) {
	if !in.Status.Valid() {
		return api.RequestRespondResult{}, apierr.Invalid("status", "must be accepted, needs_context, declined or result_ready")
	}
	expected, err := parseDec("expected_revision", in.ExpectedRevision)
	if err != nil {
		return api.RequestRespondResult{}, err
	}
	cont, err := validateContent(in.BodyMd, nil, in.Files, nil, c.settings)
	if err != nil {
		return api.RequestRespondResult{}, err
	}
	if in.Status == api.ResponseStatusResultReady {
		for i, f := range cont.files {
			if f.Unversioned {
				return api.RequestRespondResult{}, apierr.Invalid(fieldIndex("files", i),
					"a result_ready reply needs a version_label, sha256 or commit on every file reference").WithReason("unversioned_result")
			}
		}
	}
	// The reply carries no mentions and no requests: a declaration never asks for more work.
	none := sendTargets{mentions: []uuid.UUID{}, requests: []uuid.UUID{}}
	if err := checkEnvelope(cont, none, nil, c.settings); err != nil {
		return api.RequestRespondResult{}, err
	}
	msg, _, err := readableMessage(ctx, tx, c, id)
	if err != nil {
		return api.RequestRespondResult{}, err
	}
	if _, err := tx.RequestOf(ctx, c.p.BoxID, msg.ID, c.p.AgentID); err == store.ErrNotFound {
		return api.RequestRespondResult{}, apierr.Forbidden("not_requested")
	} else if err != nil {
		return api.RequestRespondResult{}, err
	}
	// Plan the reply as a send into the request's room or DM pair: this locks the channel
	// (re-checking membership and, for rooms, that the room is not archived).
	var plan sendPlan
	if msg.DestKind == "dm" {
		plan, err = planDM(ctx, tx, c, msg.SenderID, none, queuedLocks{})
		if e, ok := apierr.As(err); ok && e.Code == apierr.NotFoundOrForbidden {
			err = apierr.NotFound() // the requester is disabled: no destination field to name here
		}
	} else {
		plan, err = planRoom(ctx, tx, c, msg.ChannelID, none, queuedLocks{})
	}
	if err != nil {
		return api.RequestRespondResult{}, err
	}
	plan.reply = &msg
	decl, ok, err := tx.DeclareRequest(ctx, c.p.BoxID, msg.ID, c.p.AgentID, expected,
		store.Declaration{Status: string(in.Status), ReplyMessageID: plan.copy.ID}, c.now)
	if err != nil {
		return api.RequestRespondResult{}, err
	}
	if !ok {
		cur, err := tx.RequestOf(ctx, c.p.BoxID, msg.ID, c.p.AgentID)
		if err != nil {
			return api.RequestRespondResult{}, err
		}
		return api.RequestRespondResult{}, apierr.Conflict(cur.Revision).WithField("expected_revision")
	}
	// The reply is always stored, even when byte-identical to the caller's latest message in
	// the channel: consecutive-duplicate suppression belongs to message_send, and a
	// declaration promises exactly one reply.
	res, err := deliverPlan(ctx, tx, c, plan, cont, none)
	if err != nil {
		return api.RequestRespondResult{}, err
	}
	sent := res.Sent[0]
	return api.RequestRespondResult{Request: requestDTO(decl), Reply: &api.MessageRef{MessageId: sent.MessageID, MessageSeq: dec(sent.Seq)}}, nil
}
