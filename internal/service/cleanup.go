package service

import (
	"context"
	"encoding/json"
	"log/slog"
	"time"

	"github.com/google/uuid"

	"github.com/agentbox/agentbox/gen/api"
	"github.com/agentbox/agentbox/internal/store"
)

// Retention cleanup as an observable job (SPEC §11). Every write applies retention to its own
// channel inside its transaction (store.DeliverMessages), and a run that deletes something is
// counted in the box's cleanup status. When an admin lowers a cap, the lowered caps apply
// retroactively to every channel of the box in the settings transaction.

// cleanupBatch is how many channels one retroactive retention statement covers.
const cleanupBatch = 500

// AdminCleanupStatus reports a box's retention cleanup health (idle with zero counts before
// any run).
func (s *Service) AdminCleanupStatus(ctx context.Context, req api.AdminCleanupStatusRequestObject) (api.AdminCleanupStatusResponseObject, error) {
	out, err := runAdmin(ctx, s, "admin_cleanup_status", func(ctx context.Context, tx *store.Tx, now time.Time) (api.AdminCleanupStatus, error) {
		b, err := box(ctx, tx, req.BoxKey)
		if err != nil {
			return api.AdminCleanupStatus{}, err
		}
		st, err := tx.CleanupStatus(ctx, b.ID)
		return api.AdminCleanupStatus{BoxKey: b.Key, State: api.CleanupState(st.State), Runs: st.Runs,
			DeletedMessages: st.DeletedMessages, Failures: st.Failures, LastRunAt: utc(st.LastRunAt), LastError: st.LastError}, err
	})
	if err != nil {
		return nil, err
	}
	return api.AdminCleanupStatus200JSONResponse(out), nil
}

// cleanupAfterCapChange runs the retroactive cleanup when a settings change lowered
// channel_message_cap or channel_attachment_cap: every channel of the box, locked in
// channel_id order as sends lock them, keeps its newest messages within the new caps. It runs
// inside the admin transaction, in a savepoint: a failed cleanup is recorded (state failed,
// failures, last_error) and the settings change still commits — each channel's next write
// applies the new caps anyway.
func (s *Service) cleanupAfterCapChange(ctx context.Context, tx *store.Tx, boxID uuid.UUID, oldOverrides json.RawMessage, v api.SettingsValues, now time.Time) error {
	old, err := effectiveSettings(oldOverrides)
	if err != nil {
		return err
	}
	if v.ChannelMessageCap >= old.ChannelMessageCap && v.ChannelAttachmentCap >= old.ChannelAttachmentCap {
		return nil
	}
	var deleted int64
	err = tx.Savepoint(ctx, func(tx *store.Tx) error {
		after := uuid.Nil
		for {
			channels, err := tx.LockBoxChannels(ctx, boxID, after, cleanupBatch)
			if err != nil || len(channels) == 0 {
				return err
			}
			n, err := tx.EnforceRetention(ctx, boxID, channels, v.ChannelMessageCap, v.ChannelAttachmentCap)
			if err != nil {
				return err
			}
			deleted += n
			after = channels[len(channels)-1]
		}
	})
	if err != nil {
		if ctx.Err() != nil {
			return err
		}
		s.log.ErrorContext(ctx, "retroactive retention cleanup failed", slog.String("box_id", boxID.String()), slog.Any("err", err))
		return tx.RecordCleanupFailure(ctx, boxID, "retroactive cleanup after a lowered cap failed; each channel's next write applies the cap", now)
	}
	return tx.RecordCleanupRun(ctx, boxID, deleted, now)
}
