package service

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/url"
	"strings"

	"github.com/google/uuid"

	"github.com/agentbox/agentbox/gen/api"
	"github.com/agentbox/agentbox/internal/apierr"
	"github.com/agentbox/agentbox/internal/auth"
	"github.com/agentbox/agentbox/internal/store"
	"github.com/agentbox/agentbox/internal/upload"
)

// Uploaded attachments (SPEC §6): the transport stages an upload (internal/upload) under the
// limits UploadLimits returns; the send stores it (send.go); AttachmentDownload streams it
// back to a caller authorized to its message now.

// UploadLimits are the authenticated caller's box upload settings, read before an upload is
// admitted (the upload streams before its send's transaction begins).
func (s *Service) UploadLimits(ctx context.Context) (upload.Limits, error) {
	p, ok := auth.PrincipalFrom(ctx)
	if !ok {
		return upload.Limits{}, apierr.Auth()
	}
	var bs settingsSnapshot
	err := s.store.InTx(ctx, func(tx *store.Tx) (err error) {
		bs, err = s.boxSettings(ctx, tx, p)
		return err
	})
	if err != nil {
		return upload.Limits{}, s.wireError(ctx, "upload_limits", err)
	}
	v := bs.values
	return upload.Limits{MaxBytes: v.AttachmentMaxBytes, TempMaxBytes: v.UploadTempMaxBytes, ConcurrencyMax: v.UploadConcurrencyMax,
		KeepsNoAttachments: v.ChannelAttachmentCap < 1, SettingsRevision: bs.revision}, nil
}

// downloadChunks is how many chunks one read of a download fetches (1 MiB): the bytes a
// download holds in memory at once.
const downloadChunks = 4

// AttachmentDownload streams an attachment's bytes if the caller may read its message now
// (the rule of message_get, checked on every request); anything else — unknown ID, another
// box's, a room the caller is not or no longer an active member of, a message below its
// epoch, a purged message — is the same NOT_FOUND_OR_FORBIDDEN. It records no receipt and is
// not an ACK. The bytes are read window by window after the authorization committed.
func (s *Service) AttachmentDownload(ctx context.Context, req api.AttachmentDownloadRequestObject) (api.AttachmentDownloadResponseObject, error) {
	var meta store.AttachmentMeta
	var boxID uuid.UUID
	err := s.store.InTx(ctx, func(tx *store.Tx) error {
		c, err := s.agentCall(ctx, tx, false)
		if err != nil {
			return err
		}
		boxID = c.p.BoxID
		msgID, err := tx.AttachmentMessageID(ctx, c.p.BoxID, req.AttachmentId)
		if err == store.ErrNotFound {
			return apierr.NotFound()
		}
		if err != nil {
			return err
		}
		m, err := tx.MessageByID(ctx, c.p.BoxID, msgID)
		if err == store.ErrNotFound || (err == nil && m.Attachment == nil) {
			return apierr.NotFound()
		}
		if err != nil {
			return err
		}
		_, visible, err := messageView(ctx, tx, c, m)
		if err != nil {
			return err
		}
		if !visible {
			return apierr.NotFound()
		}
		meta = *m.Attachment
		return nil
	})
	if err != nil {
		return nil, s.wireError(ctx, "attachment_download", err)
	}
	size, disposition, nosniff, sandbox := meta.SizeBytes, contentDisposition(meta.Name), "nosniff", "sandbox"
	return api.AttachmentDownload200AsteriskResponse{
		Body:          &attachmentReader{ctx: ctx, s: s, boxID: boxID, id: meta.ID, left: meta.SizeBytes},
		ContentType:   meta.MediaType,
		ContentLength: size,
		Headers: api.AttachmentDownload200ResponseHeaders{ContentLength: &size, ContentDisposition: &disposition,
			AgentboxAttachmentSha256: &meta.SHA256, XContentTypeOptions: &nosniff, ContentSecurityPolicy: &sandbox},
	}, nil
}

// contentDisposition names the file for a download: an ASCII fallback and the exact UTF-8
// name (RFC 6266, RFC 5987).
func contentDisposition(name string) string {
	if v := mime.FormatMediaType("attachment", map[string]string{"filename": name}); v != "" && !strings.Contains(v, "*=") {
		return v
	}
	ascii := strings.Map(func(r rune) rune {
		if r < 0x20 || r > 0x7e || r == '"' || r == '\\' {
			return '_'
		}
		return r
	}, name)
	return fmt.Sprintf(`attachment; filename="%s"; filename*=UTF-8''%s`, ascii, url.PathEscape(name))
}

// attachmentReader reads an attachment's chunks a window at a time. A message purged
// mid-download ends the body early with an error (the response is cut short of its
// Content-Length, so the client sees an incomplete download, never a wrong one).
type attachmentReader struct {
	ctx   context.Context
	s     *Service
	boxID uuid.UUID
	id    uuid.UUID
	next  int32    // the next chunk index to fetch
	buf   [][]byte // fetched chunks not yet read
	left  int64    // bytes not yet returned
}

var errAttachmentGone = errors.New("service: attachment removed during download")

func (r *attachmentReader) Read(p []byte) (int, error) {
	if r.left == 0 {
		return 0, io.EOF
	}
	for len(r.buf) == 0 {
		chunks, err := r.s.store.AttachmentChunks(r.ctx, r.boxID, r.id, r.next, downloadChunks)
		if err != nil {
			return 0, err
		}
		if len(chunks) == 0 {
			return 0, errAttachmentGone
		}
		r.buf = chunks
		r.next += int32(len(chunks))
	}
	n := copy(p, r.buf[0])
	if int64(n) > r.left {
		return 0, errAttachmentGone
	}
	r.buf[0] = r.buf[0][n:]
	if len(r.buf[0]) == 0 {
		r.buf[0] = nil
		r.buf = r.buf[1:]
	}
	r.left -= int64(n)
	return n, nil
}
