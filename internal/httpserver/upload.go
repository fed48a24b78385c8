package httpserver

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/textproto"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/agentbox/agentbox/gen/mcp"
	"github.com/agentbox/agentbox/internal/apierr"
	"github.com/agentbox/agentbox/internal/auth"
	"github.com/agentbox/agentbox/internal/schema"
	"github.com/agentbox/agentbox/internal/upload"
)

// Uploads (SPEC §6): an operation whose requestBody declares multipart/form-data in the
// contract also takes exactly two parts — `input`, the same JSON object as its JSON form,
// validated by the same strict decoder (ValidateBody), and `file`, one file with a filename
// and a media type. The file is admitted and staged by internal/upload before the operation
// runs (so no transaction waits on a client's upload), and reaches the service through the
// request context; the operation then runs exactly as its JSON form, with the staged file.
// The temporary file is removed when the request ends, whatever the outcome.

const (
	inputPart = "input"
	filePart  = "file"
)

// UploadConfig enables multipart uploads.
type UploadConfig struct {
	Stager *upload.Stager
	// Limits returns the authenticated caller's box upload limits.
	Limits func(context.Context) (upload.Limits, error)
}

// isUpload reports whether r is a multipart request to an operation that declares one.
func isUpload(op *mcp.Operation, r *http.Request) bool {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	return err == nil && mt == "multipart/form-data" && slices.Contains(op.MediaTypes, mt)
}

// serveUpload admits and stages the request's file, validates its JSON part and hands the
// operation its JSON form with the staged file in the context.
func serveUpload(cfg Config, op *mcp.Operation, w http.ResponseWriter, r *http.Request, next http.Handler) {
	up := cfg.Uploads
	if up == nil || up.Stager == nil {
		WriteError(w, apierr.Invalid("", "this server does not accept uploads"))
		return
	}
	ctx := r.Context()
	p, _ := auth.PrincipalFrom(ctx)
	lim, err := up.Limits(ctx)
	if err != nil {
		refuseUpload(w, err)
		return
	}
	// Admission reserves the most this upload may stage (its whole request when declared,
	// never past the file cap); a box that can never admit it refuses it here, before a byte
	// of the body is read.
	slot, err := up.Stager.Admit(p.BoxID, lim, r.ContentLength)
	if err != nil {
		refuseUpload(w, err)
		return
	}
	defer slot.Release()
	input, file, err := readParts(r, op, slot)
	if err != nil {
		var staging *upload.StagingError
		e, ok := apierr.As(err)
		switch {
		case errors.As(err, &staging): // the server's temporary storage failed, not the client
			up.Stager.Reject(upload.ReasonStagingFailed)
			logStagingFailure(ctx, cfg.Log, staging)
			e = upload.StagingFailed()
		case !ok: // the client went away, stalled or sent a broken body: nothing is kept
			up.Stager.Reject(upload.ReasonAborted)
			e = UnreadableBody(err, "the multipart body could not be read")
		case e.Reason == upload.ReasonTooLarge || e.Reason == upload.ReasonTooLargeForBox:
			up.Stager.Reject(e.Reason)
		default:
			up.Stager.Reject(upload.ReasonInvalid)
		}
		refuseUpload(w, e)
		return
	}
	r = r.WithContext(upload.WithFile(ctx, file))
	r.Header.Set("Content-Type", "application/json")
	r.Body = io.NopCloser(bytes.NewReader(input))
	r.ContentLength = int64(len(input))
	next.ServeHTTP(w, r)
}

// logStagingFailure logs where and how staging failed: the directory, the operation and
// the errno, never the client's file name, input or bytes.
func logStagingFailure(ctx context.Context, log *slog.Logger, e *upload.StagingError) {
	attrs := []any{slog.String("dir", e.Dir), slog.String("op", e.Op)}
	if errno := e.Errno(); errno != 0 {
		attrs = append(attrs, slog.String("errno", unix.ErrnoName(errno)), slog.String("error", errno.Error()))
	} else {
		attrs = append(attrs, slog.String("error", e.Err.Error()))
	}
	log.ErrorContext(ctx, "upload staging failed", attrs...)
}

// refuseUpload answers a refused upload and closes the connection: the rest of the body is
// never read (net/http would otherwise drain it before answering).
func refuseUpload(w http.ResponseWriter, err error) {
	w.Header().Set("Connection", "close")
	WriteError(w, err)
}

// readParts reads exactly one `input` part (validated like the JSON body) and one `file`
// part (staged). Any other part, a repeated part or a missing one is INVALID_ARGUMENT.
func readParts(r *http.Request, op *mcp.Operation, slot *upload.Slot) ([]byte, *upload.File, error) {
	mr, err := r.MultipartReader()
	if err != nil {
		return nil, nil, apierr.Invalid("", "the multipart body is malformed")
	}
	var input []byte
	var file *upload.File
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		var unreadableHeader textproto.ProtocolError
		if errors.As(err, &unreadableHeader) {
			// A part header the MIME parser refuses (a control character in it, most often in
			// the filename): the client's mistake, named like any other bad part, not a body
			// that failed to arrive. The parser's message quotes the line; it is not passed on.
			field := ""
			if strings.Contains(string(unreadableHeader), "filename") {
				field = filePart
			}
			return nil, nil, apierr.Invalid(field, "a part's header could not be read; header lines and the filename take no control characters").
				WithReason(upload.ReasonInvalid)
		}
		if err != nil {
			return nil, nil, err
		}
		// The part's header parsed here rather than by FormName and FileName: a malformed one
		// is named as such (they would make it a nameless part), and the file name keeps what
		// BaseName drops (FileName's filepath.Base knows / only).
		disposition, dparams, err := mime.ParseMediaType(part.Header.Get("Content-Disposition"))
		if err != nil || disposition != "form-data" {
			return nil, nil, apierr.Invalid("", "a part's Content-Disposition header is malformed; each part needs form-data; name=\"input\" or name=\"file\"; filename=\"…\"").
				WithReason(upload.ReasonInvalid)
		}
		switch dparams["name"] {
		case inputPart:
			if input != nil {
				return nil, nil, apierr.Invalid(inputPart, "exactly one input part is allowed")
			}
			if ct := part.Header.Get("Content-Type"); ct != "" {
				if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
					return nil, nil, apierr.Invalid(inputPart, "the input part must be application/json")
				}
			}
			raw, err := io.ReadAll(io.LimitReader(part, schema.MaxRequestBytes+1))
			if err != nil {
				return nil, nil, err
			}
			if len(raw) > schema.MaxRequestBytes {
				return nil, nil, apierr.TooLarge(inputPart, "request_too_large", schema.MaxRequestBytes)
			}
			if len(bytes.TrimSpace(raw)) == 0 {
				raw = []byte("{}")
			}
			if err := ValidateBody(op, raw); err != nil {
				return nil, nil, err
			}
			input = raw
		case filePart:
			if file != nil {
				return nil, nil, apierr.Invalid(filePart, "exactly one file part is allowed")
			}
			name := upload.BaseName(dparams["filename"])
			if !upload.ValidName(name) {
				return nil, nil, apierr.Invalid(filePart, "the file part needs a filename of 1..255 bytes without control or bidirectional formatting characters").
					WithReason(upload.ReasonInvalid)
			}
			mediaType := "application/octet-stream"
			if ct := part.Header.Get("Content-Type"); ct != "" {
				mt, params, err := mime.ParseMediaType(ct)
				if typ, sub, ok := strings.Cut(mt, "/"); err != nil || len(ct) > 255 || !ok || typ == "" || sub == "" || strings.Contains(sub, "/") {
					return nil, nil, apierr.Invalid(filePart, "the file part's media type is malformed").WithReason(upload.ReasonInvalid)
				}
				mediaType = mime.FormatMediaType(mt, params)
			}
			if file, err = slot.Stage(part, name, mediaType); err != nil {
				return nil, nil, err
			}
		default: // named like an unknown JSON field: by its name when it is name-like, never echoing other text
			field := ""
			if schema.NameLike(dparams["name"]) {
				field = dparams["name"]
			}
			return nil, nil, apierr.Invalid(field, "only the parts "+strings.Join([]string{inputPart, filePart}, " and ")+" are allowed").
				WithReason(upload.ReasonInvalid)
		}
	}
	switch {
	case input == nil:
		return nil, nil, apierr.Invalid(inputPart, "the input part is required")
	case file == nil:
		return nil, nil, apierr.Invalid(filePart, "the file part is required")
	}
	return input, file, nil
}
