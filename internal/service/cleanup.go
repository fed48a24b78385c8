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
// channel_message_cap, channel_attachment_cap or attachment_max_bytes, or when the box's last
// one failed (the caps in force are then not applied everywhere yet): every channel of the
// box, locked in channel_id order as sends lock them, loses its messages whose attachment is
// now too large and keeps its newest messages within the caps. It runs inside the caller's
// transaction (a settings update's, or RetryFailedCleanups'), which holds the box's settings,
// in a savepoint: a failed cleanup is recorded (state failed, failures, last_error) and the
// settings change still commits — each channel's next write applies the new caps anyway, and
// RetryFailedCleanups runs the cleanup again until it succeeds.
func (s *Service) cleanupAfterCapChange(ctx context.Context, tx *store.Tx, boxID uuid.UUID, oldOverrides json.RawMessage, v api.SettingsValues, now time.Time) error {
	old, err := effectiveSettings(oldOverrides)
	if err != nil {
		return err
	}
	sizeLowered := v.AttachmentMaxBytes < old.AttachmentMaxBytes
	if v.ChannelMessageCap >= old.ChannelMessageCap && v.ChannelAttachmentCap >= old.ChannelAttachmentCap && !sizeLowered {
		st, err := tx.CleanupStatus(ctx, boxID)
		if err != nil || st.State != "failed" {
			return err
		}
		sizeLowered = true // a failed cleanup may have left any of the caps unapplied
	}
	var deleted int64
	err = tx.Savepoint(ctx, func(tx *store.Tx) error {
		after := uuid.Nil
		for {
			channels, err := tx.LockBoxChannels(ctx, boxID, after, cleanupBatch)
			if err != nil || len(channels) == 0 {
				return err
			}
			if sizeLowered { // attachments now over the size cap go first, with their whole messages
				n, err := tx.DeleteOversizedAttachmentMessages(ctx, boxID, channels, v.AttachmentMaxBytes)
				if err != nil {
					return err
				}
				deleted += n
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
		return tx.RecordCleanupFailure(ctx, boxID, cleanupFailure(err), now)
	}
	return tx.RecordCleanupRun(ctx, boxID, deleted, true, now)
}

// cleanupFailure is a failed cleanup's last_error: what kind of failure it was
// (store.FailureCause: unreachable, or the SQLSTATE), never the database's own message, which
// may quote values (SPEC §12).
func cleanupFailure(err error) string {
	return "retroactive cleanup after a lowered cap failed (" + store.FailureCause(err) +
		"); retried about once a minute until it succeeds, and each channel's next write applies the caps meanwhile"
}

// cleanupRetryInterval is how often a server process retries the failed cleanups.
const cleanupRetryInterval = time.Minute

// RetryFailedCleanups runs the retroactive cleanup again for every box whose last one failed,
// each in its own transaction holding the box's settings (as a settings update does), with
// the caps in force: once what made it fail is gone, every channel is within its caps and the
// state is idle. Several server processes may run it: the channel locks serialize them, and
// a cleanup that finds nothing to delete still clears the failed state.
func (s *Service) RetryFailedCleanups(ctx context.Context) error {
	boxes, err := s.store.FailedCleanupBoxes(ctx)
	if err != nil {
		return err
	}
	for _, id := range boxes {
		ctx, cancel := context.WithTimeout(ctx, capCleanupTimeout)
		err := s.store.InTx(ctx, func(tx *store.Tx) error {
			overrides, _, err := tx.LockBoxSettings(ctx, id)
			if err != nil {
				return err
			}
			v, err := effectiveSettings(overrides)
			if err != nil {
				return err
			}
			return s.cleanupAfterCapChange(ctx, tx, id, overrides, v, s.clock.Now())
		})
		cancel()
		if err != nil && err != store.ErrNotFound { // a box deleted meanwhile has nothing to clean
			return err
		}
	}
	return nil
}

// KeepRetryingCleanups runs RetryFailedCleanups every interval until ctx ends (agentbox serve).
func (s *Service) KeepRetryingCleanups(ctx context.Context) {
	t := time.NewTicker(cleanupRetryInterval)
	defer t.Stop()
	failing := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		err := s.RetryFailedCleanups(ctx)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil && !failing:
			s.log.WarnContext(ctx, "retrying failed retention cleanups failed; retrying quietly every interval until it works", slog.Any("err", err))
		case err == nil && failing:
			s.log.InfoContext(ctx, "retrying failed retention cleanups works again")
		}
		failing = err != nil
	}
}
