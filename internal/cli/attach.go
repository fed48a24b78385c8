package cli

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/agentbox/agentbox/gen/client"
	genmcp "github.com/agentbox/agentbox/gen/mcp"
	"github.com/agentbox/agentbox/internal/apierr"
	"github.com/agentbox/agentbox/internal/mcpserver"
	"github.com/agentbox/agentbox/internal/upload"
)

// Uploaded attachments on the command line (SPEC §6, §13.4), HTTP only — `agentbox mcp`
// never carries bytes:
//
//	agentbox message send … --attach PATH          (and message send-batch … --attach PATH)
//	agentbox attachment download --attachment-id ID --out PATH
//
// --attach reads the local file and sends it as the multipart file part, the rest of the
// command's input (flags, --input, stdin) as its JSON part; the server never sees the path.
// The download writes to the explicit --out path, checks the server's SHA-256, and prints the
// metadata as JSON.

// attachOps are the tools whose operation takes a multipart upload.
var attachOps = map[string]bool{"message_send": true, "message_send_batch": true}

// attachmentCommand runs the commands above; ok is false when args name none of them.
func (e *env) attachmentCommand(args []string) (ok bool, err error) {
	if len(args) > 0 && args[0] == "attachment" {
		if len(args) >= 2 && args[1] == "download" {
			return true, e.attachmentDownload(args[2:])
		}
		if len(args) >= 2 && isHelp(args[1]) {
			return true, e.attachmentDownload([]string{"--help"})
		}
		return true, usagef("attachment needs a verb: attachment download (agentbox attachment download --help)")
	}
	path, rest, found, err := cutAttach(args)
	if !found {
		return false, nil
	}
	t, toolArgs, ok := findTool(rest)
	switch {
	case !ok || !attachOps[t.Name]:
		return true, usagef("--attach is only for message send and message send-batch")
	case err != nil:
		return true, err
	}
	e.attach = path
	return true, e.runTool(t, toolArgs)
}

// cutAttach removes --attach PATH (or --attach=PATH) from args.
func cutAttach(args []string) (path string, rest []string, found bool, err error) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--attach" || a == "-attach":
			if i+1 >= len(args) {
				return "", nil, true, usagef("--attach needs a file path")
			}
			path, found = args[i+1], true
			i++
		case strings.HasPrefix(a, "--attach=") || strings.HasPrefix(a, "-attach="):
			path, found = a[strings.Index(a, "=")+1:], true
		default:
			rest = append(rest, a)
		}
	}
	if found && path == "" {
		return "", nil, true, usagef("--attach needs a file path")
	}
	return path, rest, found, nil
}

// sendWithAttachment posts a tool's checked arguments with the local file e.attach as a
// multipart upload, streaming the file from disk.
func (e *env) sendWithAttachment(t *genmcp.Tool, argsJSON json.RawMessage) error {
	var args map[string]json.RawMessage
	if err := json.Unmarshal(argsJSON, &args); err != nil {
		return usagef("the input must be a JSON object")
	}
	var boxKey string
	if err := json.Unmarshal(args["box_key"], &boxKey); err != nil || boxKey == "" {
		return usagef("set --box or AGENTBOX_BOX")
	}
	delete(args, "box_key")
	input, err := json.Marshal(args)
	if err != nil {
		return err
	}
	f, err := os.Open(e.attach)
	if err != nil {
		return usagef("--attach: %v", err)
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return usagef("--attach must name a regular file")
	}
	name, err := attachName(e.attach)
	if err != nil {
		return err
	}
	mediaType := mime.TypeByExtension(filepath.Ext(name))
	if mediaType == "" {
		mediaType = "application/octet-stream"
	}
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	go func() {
		h := textproto.MIMEHeader{}
		h.Set("Content-Disposition", `form-data; name="input"`)
		h.Set("Content-Type", "application/json")
		part, err := mw.CreatePart(h)
		if err == nil {
			_, err = part.Write(input)
		}
		if err == nil {
			h = textproto.MIMEHeader{}
			h.Set("Content-Disposition", mime.FormatMediaType("form-data", map[string]string{"name": "file", "filename": name}))
			h.Set("Content-Type", mediaType)
			if part, err = mw.CreatePart(h); err == nil {
				_, err = io.Copy(part, f)
			}
		}
		if err == nil {
			err = mw.Close()
		}
		pw.CloseWithError(err)
	}()
	c, l, key, err := agentClient(boxKey, 0) // no time bound: the upload may be large
	if err != nil {
		return err
	}
	ctx := context.Background()
	var resp *http.Response
	if t.Name == "message_send" {
		resp, err = c.MessageSendWithBody(ctx, boxKey, &client.MessageSendParams{}, mw.FormDataContentType(), pr, agentHeaders(key))
	} else {
		resp, err = c.MessageSendBatchWithBody(ctx, boxKey, &client.MessageSendBatchParams{}, mw.FormDataContentType(), pr, agentHeaders(key))
	}
	pr.Close()
	after := afterLostCall(t, argsJSON)
	if err != nil {
		return l.explain(err, after)
	}
	body, err := mcpserver.ReadResponse(resp)
	if err != nil {
		return l.explain(err, after)
	}
	if op := genmcp.Operations[t.OperationID]; op != nil && !mcpserver.AnswerFits(op, body) {
		return fmt.Errorf("%w; %s", &mcpserver.UnexpectedAnswerError{Operation: op.OperationID, Status: resp.StatusCode}, after)
	}
	return writeIndented(e.stdout, body)
}

// attachName is the file name an upload of path carries, refused as the server refuses it
// (before anything is sent).
func attachName(path string) (string, error) {
	name := filepath.Base(path)
	if !upload.ValidName(name) {
		return "", apierr.Invalid("file", "the file's name must be 1..255 bytes without a backslash, control or bidirectional formatting characters").
			WithReason(upload.ReasonInvalid)
	}
	return name, nil
}

const attachmentUsage = `usage: agentbox attachment download --attachment-id ID --out PATH [--box K]

Download an uploaded attachment to a local file (HTTP only; not an ACK) and print its metadata.
`

// attachmentDownload writes an attachment to --out and prints its metadata.
func (e *env) attachmentDownload(args []string) error {
	fs := flag.NewFlagSet("agentbox attachment download", flag.ContinueOnError)
	id := fs.String("attachment-id", "", "the attachment_id (from a message's attachment)")
	out := fs.String("out", "", "the local file to write (replaced if it exists)")
	box := fs.String("box", os.Getenv("AGENTBOX_BOX"), "box_key")
	if err := parseArgs(fs, args, attachmentUsage, []string{"attachment-id", "out"}, map[string]string{"box": "or AGENTBOX_BOX"}); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("unexpected argument: the %s argument after the flags is not a flag (%s --help lists the flags)", ordinal(1), fs.Name())
	}
	attID, err := uuid.Parse(*id)
	switch {
	case *id == "":
		return usagef("%s: missing required --attachment-id (%s --help lists the flags)", fs.Name(), fs.Name())
	case err != nil:
		return usagef("--attachment-id must be a UUID")
	case *out == "":
		return usagef("--out is required: downloads go to an explicit local path")
	case *out == "-":
		return usagef("--out - is not taken: stdout carries the download's metadata; give a file path")
	case isDir(*out):
		return usagef("--out names a directory; give the file's path in it")
	case *box == "":
		return usagef("set --box or AGENTBOX_BOX")
	}
	if err := checkValue("box_key", *box); err != nil {
		return err
	}
	c, l, key, err := agentClient(*box, 0) // no time bound: the file may be large
	if err != nil {
		return err
	}
	const again = "nothing was changed; repeat the command"
	resp, err := c.AttachmentDownload(context.Background(), *box, attID, &client.AttachmentDownloadParams{}, agentHeaders(key))
	if err != nil {
		return l.explain(err, again)
	}
	if resp.StatusCode != http.StatusOK {
		_, err := mcpserver.ReadResponse(resp)
		return l.explain(err, again)
	}
	defer resp.Body.Close()
	if resp.Header.Get("Agentbox-Attachment-Sha256") == "" { // every download of Agentbox's has it
		return fmt.Errorf("%w; nothing was written to --out", &mcpserver.UnexpectedAnswerError{Operation: "attachment_download", Status: resp.StatusCode})
	}
	// Written beside the destination and renamed into place only when complete and verified.
	tmp, err := os.CreateTemp(filepath.Dir(*out), ".agentbox-download-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) //nolint:errcheck // gone after the rename
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(tmp, h), resp.Body)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	want := resp.Header.Get("Agentbox-Attachment-Sha256")
	got := hex.EncodeToString(h.Sum(nil))
	switch {
	case err != nil:
		return l.explain(err, "nothing was written to --out; repeat the command")
	case resp.ContentLength >= 0 && n != resp.ContentLength, got != want:
		return errors.New("the downloaded bytes do not match the server's size and SHA-256; nothing was written to --out")
	}
	if err := os.Rename(tmp.Name(), *out); err != nil {
		return err
	}
	name := ""
	if _, params, err := mime.ParseMediaType(resp.Header.Get("Content-Disposition")); err == nil {
		name = params["filename"]
	}
	meta, _ := json.Marshal(map[string]any{"attachment_id": attID, "name": name, "media_type": resp.Header.Get("Content-Type"),
		"size_bytes": n, "sha256": got, "out": *out})
	return writeIndented(e.stdout, meta)
}

func isDir(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.IsDir()
}

// agentClient is the generated HTTP client (over a link, timeout 0: none) with the box's key
// (AGENTBOX_API_KEY or the AGENTBOX_CREDENTIALS entry).
func agentClient(boxKey string, timeout time.Duration) (*client.Client, *link, string, error) {
	creds, err := mcpserver.CredentialsFromEnv(os.Getenv)
	if err != nil {
		return nil, nil, "", usageError{err.Error()}
	}
	if _, err := mcpserver.SessionFromEnv(os.Getenv); err != nil { // sent by agentHeaders
		return nil, nil, "", usageError{err.Error()}
	}
	key, ok := creds.Key(boxKey)
	if !ok {
		return nil, nil, "", apierr.Auth()
	}
	server, shown, err := serverBase()
	if err != nil {
		return nil, nil, "", err
	}
	l := newLink(shown)
	c, err := client.NewClient(strings.TrimRight(server, "/"), client.WithHTTPClient(l.httpClient(timeout)))
	return c, l, key, err
}

// agentHeaders sets the key and, when AGENTBOX_SESSION is set, the session header.
func agentHeaders(key string) client.RequestEditorFn {
	return func(_ context.Context, r *http.Request) error {
		r.Header.Set("Authorization", "Bearer "+key)
		if s := os.Getenv("AGENTBOX_SESSION"); s != "" {
			r.Header.Set("Agentbox-Session", s)
		}
		return nil
	}
}
