package service_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"mime/multipart"
	"net"
	"net/http"
	"net/textproto"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/testenv"
)

// Uploaded attachments (SPEC §6, §11): multipart sends, staging limits, per-target copies,
// duplicate suppression, authorized streaming download, retention.

// multipartBody builds an upload: the input part, then a file part (skipped when name is "").
func multipartBody(t *testing.T, input any, name, mediaType string, data []byte) (string, []byte) {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	raw, _ := json.Marshal(input)
	h := textproto.MIMEHeader{}
	h.Set("Content-Disposition", `form-data; name="input"`)
	h.Set("Content-Type", "application/json")
	pw, _ := mw.CreatePart(h)
	pw.Write(raw)
	if name != "" {
		h := textproto.MIMEHeader{}
		h.Set("Content-Disposition", fmt.Sprintf(`form-data; name="file"; filename=%q`, name))
		h.Set("Content-Type", mediaType)
		fw, _ := mw.CreatePart(h)
		fw.Write(data)
	}
	mw.Close()
	return mw.FormDataContentType(), buf.Bytes()
}

// rawUpload sends a message with a one-byte file part whose Content-Disposition is written
// as given, byte for byte (multipart.Writer would quote and escape it).
func rawUpload(t *testing.T, a *testenv.Agent, input any, disposition string) testenv.Response {
	t.Helper()
	raw, _ := json.Marshal(input)
	body := "--B\r\nContent-Disposition: form-data; name=\"input\"\r\nContent-Type: application/json\r\n\r\n" + string(raw) +
		"\r\n--B\r\nContent-Disposition: " + disposition + "\r\nContent-Type: text/plain\r\n\r\nf\r\n--B--\r\n"
	return a.Env.Do("POST", "/api/v1/boxes/"+a.BoxKey+"/messages", a.Key, []byte(body), map[string]string{"Content-Type": "multipart/form-data; boundary=B"})
}

// upload sends a multipart request to path (relative to the agent's box).
func upload(t *testing.T, a *testenv.Agent, path string, input any, name, mediaType string, data []byte) testenv.Response {
	t.Helper()
	ct, body := multipartBody(t, input, name, mediaType, data)
	h := map[string]string{"Content-Type": ct}
	if a.Session != "" {
		h["Agentbox-Session"] = a.Session
	}
	return a.Env.Do("POST", "/api/v1/boxes/"+a.BoxKey+path, a.Key, body, h)
}

// sendFile sends a DM or room message with an attachment and returns its message_id.
func sendFile(t *testing.T, a *testenv.Agent, dest map[string]any, body, name string, data []byte) string {
	t.Helper()
	r := upload(t, a, "/messages", map[string]any{"destination": dest, "body_md": body, "idempotency_key": newKey()}, name, "text/plain", data)
	if r.Status != http.StatusOK || r.JSON()["status"] != "sent" {
		t.Fatalf("upload: %d %s", r.Status, r.Raw)
	}
	return r.JSON()["message_id"].(string)
}

// attachmentOf is the attachment object of a message as message_get shows it.
func attachmentOf(t *testing.T, a *testenv.Agent, messageID string) map[string]any {
	t.Helper()
	att, _ := a.MustCall("GET", "/messages/"+messageID, nil)["attachment"].(map[string]any)
	if att == nil {
		t.Fatalf("message %s has no attachment", messageID)
	}
	return att
}

// download fetches an attachment; the body is returned whole (tests use small files here).
func download(t *testing.T, a *testenv.Agent, id string) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest("GET", a.Env.URL+"/api/v1/boxes/"+a.BoxKey+"/attachments/"+id, nil)
	req.Header.Set("Authorization", "Bearer "+a.Key)
	if a.Session != "" {
		req.Header.Set("Agentbox-Session", a.Session)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, raw
}

func hexSHA(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// tempFiles lists what the server's staging directory holds besides its lock.
func tempFiles(t *testing.T, e *testenv.Env) []string {
	t.Helper()
	entries, err := os.ReadDir(e.Uploads.Dir())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, en := range entries {
		if en.Name() != "lock" {
			out = append(out, en.Name())
		}
	}
	return out
}

// metric reads one sample of the server's /metrics ("" when absent).
func metric(t *testing.T, e *testenv.Env, name string) string {
	t.Helper()
	r := e.Do("GET", "/metrics", "", nil, nil)
	for _, line := range strings.Split(string(r.Raw), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			return v
		}
	}
	return ""
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A DM with an attachment: the DTO's SHA-256 is the test's own, every reader shows the
// metadata only, the download returns the bytes with their headers, and downloading records
// no receipt and ACKs nothing. An attachment-only message may have an empty body (HTTP only).
func TestAttachmentSendAndDownload(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "a", "b")
	a, b, e := w.agents["a"], w.agents["b"], w.e
	data := []byte("line one\nline two\n\x00\xff binary tail")
	id := sendFile(t, a, dmTo(b), "the build log", "build ü.log", data)

	att := attachmentOf(t, a, id)
	if att["sha256"] != hexSHA(data) || att["size_bytes"] != float64(len(data)) || att["name"] != "build ü.log" || att["media_type"] != "text/plain" {
		t.Fatalf("attachment metadata: %v", att)
	}
	if len(att) != 5 {
		t.Fatalf("attachment shows more than its metadata: %v", att)
	}
	attID := att["attachment_id"].(string)
	// The inbox and the conversation show the same metadata.
	items := ibList(t, b, ibPath("", nil, "", 0)).Items
	if len(items) != 1 {
		t.Fatalf("inbox: %+v", items)
	}
	rawInbox := b.MustCall("GET", "/inbox", nil)
	if got := rawInbox["items"].([]any)[0].(map[string]any)["message"].(map[string]any)["attachment"]; fmt.Sprint(got) != fmt.Sprint(att) {
		t.Fatalf("inbox attachment %v, want %v", got, att)
	}
	receipts := dbInt(t, e, `SELECT count(*) FROM receipts`)
	acked := dbInt(t, e, `SELECT count(*) FROM attention WHERE acked_at IS NOT NULL`)

	for _, who := range []*testenv.Agent{a, b} {
		resp, body := download(t, who, attID)
		if resp.StatusCode != http.StatusOK || !bytes.Equal(body, data) {
			t.Fatalf("download: %d %q", resp.StatusCode, body)
		}
		h := resp.Header
		if h.Get("Content-Type") != "text/plain" || h.Get("Content-Length") != fmt.Sprint(len(data)) ||
			h.Get("Agentbox-Attachment-Sha256") != hexSHA(data) || h.Get("X-Content-Type-Options") != "nosniff" || h.Get("Content-Security-Policy") != "sandbox" ||
			h.Get("Content-Disposition") != `attachment; filename="build _.log"; filename*=UTF-8''build%20%C3%BC.log` {
			t.Fatalf("download headers: %v", h)
		}
	}
	if n := dbInt(t, e, `SELECT count(*) FROM receipts`); n != receipts {
		t.Fatalf("download recorded receipts: %d -> %d", receipts, n)
	}
	if n := dbInt(t, e, `SELECT count(*) FROM attention WHERE acked_at IS NOT NULL`); n != acked {
		t.Fatalf("download ACKed: %d -> %d", acked, n)
	}

	// Attachment-only: an empty body with a file is a message; without one it is refused.
	only := upload(t, a, "/messages", map[string]any{"destination": dmTo(b), "body_md": "", "idempotency_key": newKey()}, "empty.bin", "application/octet-stream", nil)
	if only.Status != http.StatusOK || only.JSON()["status"] != "sent" {
		t.Fatalf("attachment-only: %d %s", only.Status, only.Raw)
	}
	if got := attachmentOf(t, b, only.JSON()["message_id"].(string)); got["size_bytes"] != float64(0) || got["sha256"] != hexSHA(nil) {
		t.Fatalf("empty attachment: %v", got)
	}
	rejects(t, e, "empty body without a file", func() testenv.Response {
		return a.Call("POST", "/messages", map[string]any{"destination": dmTo(b), "body_md": "", "idempotency_key": newKey()})
	}, "INVALID_ARGUMENT", "body_empty", "body_md")

	// A dry run with a file validates everything and writes nothing.
	before := dbState(t, e)
	dry := upload(t, a, "/messages", map[string]any{"destination": dmTo(b), "body_md": "dry", "dry_run": true, "idempotency_key": newKey()}, "d.txt", "text/plain", []byte("dry"))
	if dry.Status != 200 || dry.JSON()["dry_run"] != true || dry.JSON()["message_id"] != nil {
		t.Fatalf("dry run: %s", dry.Raw)
	}
	if after := dbState(t, e); after != before {
		t.Fatalf("a dry run with a file wrote:\n%s", after)
	}

	// The same idempotency key with the same file replays; with another file it conflicts.
	key := newKey()
	in := map[string]any{"destination": dmTo(b), "body_md": "v1", "idempotency_key": key}
	first := upload(t, a, "/messages", in, "v.txt", "text/plain", []byte("one"))
	again := upload(t, a, "/messages", in, "v.txt", "text/plain", []byte("one"))
	if first.Status != 200 || again.Status != 200 || first.JSON()["message_id"] != again.JSON()["message_id"] {
		t.Fatalf("replay: %s / %s", first.Raw, again.Raw)
	}
	rejects(t, e, "same key, other file", func() testenv.Response {
		return upload(t, a, "/messages", in, "v.txt", "text/plain", []byte("two"))
	}, "IDEMPOTENCY_CONFLICT", "", "idempotency_key")
	if files := tempFiles(t, e); len(files) != 0 {
		t.Fatalf("temporary files left: %v", files)
	}
}

// Upload settings at the top of their range (an operator's "no limit") keep a file whole
// (outside probe, high: at math.MaxInt64 for both, then accepted, every upload was stored as
// 0 bytes and the send said sent, the file's cap plus one having wrapped to a negative read
// limit). The range now ends at 2^53 - 1, which every JSON client reads back exactly.
func TestAttachmentLimitsAtTheirMaximum(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "a", "b")
	a, b := w.agents["a"], w.agents["b"]
	r := w.e.Do("PATCH", "/admin/api/v1/boxes/alpha/settings", testenv.AdminToken,
		map[string]any{"settings": map[string]any{"attachment_max_bytes": int64(math.MaxInt64)}}, nil)
	if r.Code() != "INVALID_ARGUMENT" || r.ErrorField("field") != "settings.attachment_max_bytes" {
		t.Fatalf("attachment_max_bytes at the int64 top: %d %s", r.Status, r.Raw)
	}
	w.settings(map[string]any{"attachment_max_bytes": int64(1<<53 - 1), "upload_temp_max_bytes": int64(1<<53 - 1)})
	data := []byte("hello attachment\n")
	att := attachmentOf(t, b, sendFile(t, a, dmTo(b), "whole", "o.txt", data))
	if att["size_bytes"] != float64(len(data)) || att["sha256"] != hexSHA(data) {
		t.Fatalf("attachment at the int64 top: %v", att)
	}
	if resp, body := download(t, b, att["attachment_id"].(string)); resp.StatusCode != http.StatusOK || !bytes.Equal(body, data) {
		t.Fatalf("download: %d %q", resp.StatusCode, body)
	}
}

// A room message has one attachment shared by every member's read state.
func TestAttachmentRoomShared(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "a", "b", "c")
	a, b, c, e := w.agents["a"], w.agents["b"], w.agents["c"], w.e
	room := w.roomWith(t, a, b, c)
	id := sendFile(t, a, inRoom(room), "spec draft", "spec.md", []byte("# spec"))
	if n := dbInt(t, e, `SELECT count(*) FROM attachments`); n != 1 {
		t.Fatalf("%d attachment rows for one room message", n)
	}
	attID := attachmentOf(t, a, id)["attachment_id"].(string)
	for _, m := range []*testenv.Agent{b, c} {
		if got := attachmentOf(t, m, id)["attachment_id"]; got != attID {
			t.Fatalf("member sees attachment %v, want %s", got, attID)
		}
		if resp, body := download(t, m, attID); resp.StatusCode != 200 || string(body) != "# spec" {
			t.Fatalf("member download: %d %s", resp.StatusCode, body)
		}
	}
}

// Every case without a current right to the message is the same NOT_FOUND_OR_FORBIDDEN, byte
// for byte: unknown ID, another box's attachment, a non-member, a member who left, a member
// whose epoch starts after the message (history_visibility joined), a purged message.
func TestAttachmentDownloadNotFoundIdentical(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "a", "b", "c", "d")
	a, b, c, d, e := w.agents["a"], w.agents["b"], w.agents["c"], w.agents["d"], w.e
	room := w.room(t, a, []*testenv.Agent{b, c}, map[string]any{"history_visibility": "joined"})
	roomAtt := attachmentOf(t, a, sendFile(t, a, inRoom(room), "r", "r.txt", []byte("room")))["attachment_id"].(string)
	dmAtt := attachmentOf(t, a, sendFile(t, a, dmTo(b), "d", "d.txt", []byte("dm")))["attachment_id"].(string)
	ibLeave(t, c, room)
	// d joins after the message: outside its epoch.
	invite(t, a, room, d)
	join(t, d, room)

	e.Box("beta")
	x := e.NewAgent("beta", "x", nil)
	x.Prime()
	otherBox := attachmentOf(t, x, sendFile(t, x, dmTo(e.NewAgent("beta", "y", nil)), "o", "o.txt", []byte("other")))["attachment_id"].(string)

	// Purged: F = 1 in a's DM with... a separate pair, so the other cases keep their messages.
	purgedMsg := sendFile(t, b, dmTo(c), "old", "old.txt", []byte("old"))
	purged := attachmentOf(t, b, purgedMsg)["attachment_id"].(string)
	w.settings(map[string]any{"channel_attachment_cap": 1})
	sendFile(t, b, dmTo(c), "new", "new.txt", []byte("new"))

	var want []byte
	for _, tc := range []struct {
		name string
		who  *testenv.Agent
		id   string
	}{
		{"unknown id", a, "6f1c2a4e-8b9d-4c1e-9f00-1a2b3c4d5e6f"},
		{"other box", a, otherBox},
		{"non-member of the DM", c, dmAtt},
		{"left member", c, roomAtt},
		{"before the joined epoch", d, roomAtt},
		{"purged", b, purged},
	} {
		resp, body := download(t, tc.who, tc.id)
		if resp.StatusCode != http.StatusNotFound || !strings.Contains(string(body), "NOT_FOUND_OR_FORBIDDEN") {
			t.Fatalf("%s: %d %s", tc.name, resp.StatusCode, body)
		}
		if want == nil {
			want = body
		} else if !bytes.Equal(body, want) {
			t.Fatalf("%s: body differs:\n%s\n%s", tc.name, body, want)
		}
	}
	// The authorized still download.
	if resp, _ := download(t, b, roomAtt); resp.StatusCode != 200 {
		t.Fatalf("active member: %d", resp.StatusCode)
	}
	if resp, _ := download(t, c, dmAtt); resp.StatusCode != 404 {
		t.Fatalf("c reads a's DM with b")
	}
}

// Over attachment_max_bytes: LIMIT_EXCEEDED, no row, no temporary file. A malformed upload
// (unknown input field, missing or repeated parts, a path as filename) writes nothing either.
func TestAttachmentRejectedUploadsLeaveNothing(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "a", "b")
	a, b, e := w.agents["a"], w.agents["b"], w.e
	w.settings(map[string]any{"attachment_max_bytes": 1000})
	in := func() map[string]any {
		return map[string]any{"destination": dmTo(b), "body_md": "x", "idempotency_key": newKey()}
	}
	r := rejects(t, e, "over the size cap", func() testenv.Response {
		return upload(t, a, "/messages", in(), "big.bin", "application/octet-stream", bytes.Repeat([]byte("z"), 1001))
	}, "LIMIT_EXCEEDED", "attachment_too_large", "file")
	if !strings.Contains(string(r.Raw), `"limit":1000`) || r.ErrorField("settings_revision") != "2" {
		t.Fatalf("limit or the settings revision it came from not published: %s", r.Raw)
	}
	if files := tempFiles(t, e); len(files) != 0 {
		t.Fatalf("temporary files left: %v", files)
	}
	// Exactly at the cap is accepted.
	sendFile(t, a, dmTo(b), "fits", "fits.bin", bytes.Repeat([]byte("z"), 1000))

	unknown := in()
	unknown["surprise"] = true
	rejects(t, e, "unknown input field", func() testenv.Response {
		return upload(t, a, "/messages", unknown, "f.txt", "text/plain", []byte("f"))
	}, "INVALID_ARGUMENT", "unknown_field", "surprise")
	rejects(t, e, "no file part", func() testenv.Response {
		return upload(t, a, "/messages", in(), "", "", nil)
	}, "INVALID_ARGUMENT", "", "file")
	rejects(t, e, "a path as filename", func() testenv.Response {
		return upload(t, a, "/messages", in(), "..", "text/plain", []byte("f"))
	}, "INVALID_ARGUMENT", "invalid_upload", "file")
	rejects(t, e, "a name that displays reversed (U+202E)", func() testenv.Response {
		return rawUpload(t, a, in(), "form-data; name=\"file\"; filename=\"\u202etxt.exe\"")
	}, "INVALID_ARGUMENT", "invalid_upload", "file")
	for _, mt := range []string{"garbage", "text/", "a/b/c"} {
		rejects(t, e, "media type "+mt, func() testenv.Response {
			return upload(t, a, "/messages", in(), "f.txt", mt, []byte("f"))
		}, "INVALID_ARGUMENT", "invalid_upload", "file")
	}
	rejects(t, e, "a blank filename", func() testenv.Response {
		return upload(t, a, "/messages", in(), "   ", "text/plain", []byte("f"))
	}, "INVALID_ARGUMENT", "invalid_upload", "file")
	// The MIME parser refuses the header line itself; the refusal is still the client's
	// mistake, named (not "the body could not be read"), and does not quote the line.
	r = rejects(t, e, "a control character in the filename", func() testenv.Response {
		return rawUpload(t, a, in(), "form-data; name=\"file\"; filename=\"a\x01secret.txt\"")
	}, "INVALID_ARGUMENT", "invalid_upload", "file")
	if strings.Contains(string(r.Raw), "secret") {
		t.Fatalf("the refusal quotes the header: %s", r.Raw)
	}
	rejects(t, e, "a malformed part header", func() testenv.Response {
		return rawUpload(t, a, in(), "form-data; name=\"file\"; filename=\"a\"b.txt\"")
	}, "INVALID_ARGUMENT", "invalid_upload", "")
	rejects(t, e, "two file parts", func() testenv.Response {
		var buf bytes.Buffer
		mw := multipart.NewWriter(&buf)
		raw, _ := json.Marshal(in())
		mw.WriteField("input", string(raw))
		for range 2 {
			fw, _ := mw.CreateFormFile("file", "f.txt")
			fw.Write([]byte("f"))
		}
		mw.Close()
		return e.Do("POST", "/api/v1/boxes/alpha/messages", a.Key, buf.Bytes(), map[string]string{"Content-Type": mw.FormDataContentType()})
	}, "INVALID_ARGUMENT", "", "file")
	// A part neither input nor file is named like an unknown JSON field: by its name when it
	// is name-like, else without a field (a token-like name is never echoed).
	for name, field := range map[string]string{"notes": "notes", "ghp_abcdefghijklmnopqrstuvwxyz0123456789": "", "a b": ""} {
		r := rejects(t, e, "an extra part "+field, func() testenv.Response {
			var buf bytes.Buffer
			mw := multipart.NewWriter(&buf)
			raw, _ := json.Marshal(in())
			mw.WriteField("input", string(raw))
			mw.WriteField(name, "x")
			fw, _ := mw.CreateFormFile("file", "f.txt")
			fw.Write([]byte("f"))
			mw.Close()
			return e.Do("POST", "/api/v1/boxes/alpha/messages", a.Key, buf.Bytes(), map[string]string{"Content-Type": mw.FormDataContentType()})
		}, "INVALID_ARGUMENT", "invalid_upload", field)
		if field == "" && strings.Contains(string(r.Raw), name) {
			t.Fatalf("the refusal quotes the part's name: %s", r.Raw)
		}
	}
	// Refused by the send itself after the file was staged: still nothing kept.
	self := in()
	self["destination"] = dmTo(a)
	rejects(t, e, "a DM to oneself with a file", func() testenv.Response {
		return upload(t, a, "/messages", self, "f.txt", "text/plain", []byte("f"))
	}, "INVALID_ARGUMENT", "self_target", "destination.recipient_agent_id")
	if files := tempFiles(t, e); len(files) != 0 {
		t.Fatalf("temporary files left: %v", files)
	}
	if v := metric(t, e, `agentbox_uploads_rejected_total{reason="attachment_too_large"}`); v != "1" {
		t.Fatalf("rejected metric: %q", v)
	}
	if v := metric(t, e, `agentbox_uploads_rejected_total{reason="invalid_upload"}`); v != "14" {
		t.Fatalf("invalid uploads metric: %q", v)
	}
}

// A client that closes its connection in the middle of the file leaves no row and no
// temporary file.
func TestAttachmentCancelledUpload(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "a", "b")
	a, b, e := w.agents["a"], w.agents["b"], w.e
	before := dbState(t, e)
	ct, body := multipartBody(t, map[string]any{"destination": dmTo(b), "body_md": "x", "idempotency_key": newKey()},
		"half.bin", "application/octet-stream", bytes.Repeat([]byte("h"), 200<<10))
	conn, err := net.Dial("tcp", strings.TrimPrefix(e.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "POST /api/v1/boxes/alpha/messages HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n",
		a.Key, ct, len(body))
	conn.Write(body[:len(body)/2]) // half of the file, then the client goes away
	waitFor(t, "the upload to be staging", func() bool { return len(tempFiles(t, e)) == 1 })
	conn.Close()
	waitFor(t, "the upload to end", func() bool { return metric(t, e, "agentbox_uploads_in_progress") == "0" })
	if files := tempFiles(t, e); len(files) != 0 {
		t.Fatalf("temporary files left: %v", files)
	}
	if after := dbState(t, e); after != before {
		t.Fatalf("a cancelled upload wrote:\n%s", after)
	}
	if metric(t, e, "agentbox_upload_temp_bytes") != "0" || metric(t, e, `agentbox_uploads_rejected_total{reason="upload_aborted"}`) != "1" {
		t.Fatalf("metrics after cancel: %s", e.Do("GET", "/metrics", "", nil, nil).Raw)
	}
}

// slowUpload starts an upload whose file part stays open until release is closed; it
// reports the response on done.
const slowFileBytes = 1000

// slowLength is the size of a slowUpload body (the same for every one: fixed-size keys).
func slowLength(in []byte, boundary string) int64 {
	var probe bytes.Buffer
	pm := multipart.NewWriter(&probe)
	pm.SetBoundary(boundary)
	pm.WriteField("input", string(in))
	fw, _ := pm.CreateFormFile("file", "slow.bin")
	fw.Write(make([]byte, slowFileBytes))
	pm.Close()
	return int64(probe.Len())
}

func slowInput(to *testenv.Agent) []byte {
	in, _ := json.Marshal(map[string]any{"destination": dmTo(to), "body_md": "slow " + newKey(), "idempotency_key": newKey()})
	return in
}

func slowUpload(t *testing.T, a *testenv.Agent, to *testenv.Agent, contentLength bool, release <-chan struct{}, done chan<- testenv.Response) {
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	in := slowInput(to)
	const fileBytes = slowFileBytes
	var length int64 = -1
	if contentLength { // the size the multipart body will have, so the server can reserve just that
		length = slowLength(in, mw.Boundary())
	}
	go func() {
		defer pw.Close()
		// A refused upload is answered before its body is read, and the client then closes
		// the body: the writes below fail, and the rest is not sent.
		mw.WriteField("input", string(in)) //nolint:errcheck
		fw, err := mw.CreateFormFile("file", "slow.bin")
		if err != nil {
			return
		}
		if _, err := fw.Write(make([]byte, fileBytes/2)); err != nil {
			return
		}
		<-release
		fw.Write(make([]byte, fileBytes/2)) //nolint:errcheck
		mw.Close()
	}()
	req, _ := http.NewRequest("POST", a.Env.URL+"/api/v1/boxes/"+a.BoxKey+"/messages", pr)
	req.ContentLength = length
	req.Header.Set("Authorization", "Bearer "+a.Key)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			done <- testenv.Response{Status: -1, Raw: []byte(err.Error())}
			return
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		done <- testenv.Response{Status: resp.StatusCode, Raw: raw}
	}()
}

// Admission under 20 concurrent uploads: at most upload_concurrency_max are admitted, and
// (separately) at most upload_temp_max_bytes of reservations; the rest are RATE_LIMITED with
// retry_after_seconds and write nothing; the admitted ones complete.
func TestAttachmentAdmissionLimits(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		settings map[string]any
		length   bool
		admitted int
		reason   string
	}{
		{"concurrency", map[string]any{"upload_concurrency_max": 3}, false, 3, "upload_concurrency_exceeded"},
		// 3.5 bodies' worth of temporary bytes admit 3 of them (upload_temp_max_bytes set below).
		{"temporary bytes", map[string]any{"upload_concurrency_max": 100}, true, 3, "upload_temp_bytes_exceeded"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t, "a", "b")
			a, b, e := w.agents["a"], w.agents["b"], w.e
			if tc.length {
				l := slowLength(slowInput(b), multipart.NewWriter(io.Discard).Boundary())
				tc.settings["upload_temp_max_bytes"] = 3*l + l/2
			}
			w.settings(tc.settings)
			release := make(chan struct{})
			var once sync.Once
			defer once.Do(func() { close(release) })
			done := make(chan testenv.Response, 20)
			for range 20 {
				slowUpload(t, a, b, tc.length, release, done)
			}
			var refused []testenv.Response
			for range 20 - tc.admitted {
				refused = append(refused, <-done)
			}
			for _, r := range refused {
				if r.Status != http.StatusTooManyRequests || r.Code() != "RATE_LIMITED" || r.ErrorField("reason") != tc.reason ||
					r.JSON()["error"].(map[string]any)["retry_after_seconds"] != float64(1) {
					t.Fatalf("refused upload: %d %s", r.Status, r.Raw)
				}
			}
			if v := metric(t, e, "agentbox_uploads_in_progress"); v != fmt.Sprint(tc.admitted) {
				t.Fatalf("in progress: %s", v)
			}
			if n := dbInt(t, e, `SELECT count(*) FROM messages`); n != 0 {
				t.Fatalf("%d messages before the admitted uploads finished", n)
			}
			once.Do(func() { close(release) })
			for range tc.admitted {
				if r := <-done; r.Status != http.StatusOK {
					t.Fatalf("admitted upload: %d %s", r.Status, r.Raw)
				}
			}
			if n := dbInt(t, e, `SELECT count(*) FROM attachments`); n != int64(tc.admitted) {
				t.Fatalf("%d attachments stored", n)
			}
			if files := tempFiles(t, e); len(files) != 0 {
				t.Fatalf("temporary files left: %v", files)
			}
			if v := metric(t, e, fmt.Sprintf("agentbox_uploads_rejected_total{reason=%q}", tc.reason)); v != fmt.Sprint(20-tc.admitted) {
				t.Fatalf("rejected metric: %s", v)
			}
		})
	}
}

// Duplicate suppression includes the attachment: same body and same file is a duplicate;
// same body with other bytes, another name or another media type is sent.
func TestAttachmentDuplicateSuppression(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "a", "b")
	a, b := w.agents["a"], w.agents["b"]
	send := func(name, mediaType, data string) map[string]any {
		r := upload(t, a, "/messages", map[string]any{"destination": dmTo(b), "body_md": "same", "idempotency_key": newKey()}, name, mediaType, []byte(data))
		if r.Status != 200 {
			t.Fatalf("send: %s", r.Raw)
		}
		return r.JSON()
	}
	first := send("a.txt", "text/plain", "bytes")
	if dup := send("a.txt", "text/plain", "bytes"); dup["status"] != "duplicate" || dup["message_id"] != first["message_id"] {
		t.Fatalf("same file: %v", dup)
	}
	last := first
	for _, v := range [][3]string{{"a.txt", "text/plain", "other"}, {"b.txt", "text/plain", "other"}, {"b.txt", "text/markdown", "other"}} {
		got := send(v[0], v[1], v[2])
		if got["status"] != "sent" || got["message_id"] == last["message_id"] {
			t.Fatalf("%v: %v", v, got)
		}
		last = got
	}
	// The same body without a file differs from the same body with one.
	if got := ibSend(t, a, dmTo(b), "same", nil); got == last["message_id"] {
		t.Fatal("a text-only send matched an attachment message")
	}
}

// A batch DM gives every sent target its own attachment owned by its own message, so one
// recipient's retention never deletes another's copy.
func TestAttachmentBatchCopiesIndependent(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "a", "b", "c")
	a, b, c, e := w.agents["a"], w.agents["b"], w.agents["c"], w.e
	data := []byte("shared report")
	r := upload(t, a, "/messages/batch", map[string]any{"recipient_agent_ids": []any{b.ID, c.ID, a.ID}, "body_md": "", "idempotency_key": newKey()},
		"report.pdf", "application/pdf", data)
	if r.Status != 200 {
		t.Fatalf("batch: %s", r.Raw)
	}
	res := r.JSON()["results"].([]any)
	msg := map[string]string{}
	for _, x := range res {
		o := x.(map[string]any)
		if o["status"] == "sent" {
			msg[o["target_agent_id"].(string)] = o["message_id"].(string)
		}
	}
	if len(msg) != 2 || res[2].(map[string]any)["status"] != "rejected" {
		t.Fatalf("outcomes: %v", res)
	}
	attB := attachmentOf(t, b, msg[b.ID.String()])
	attC := attachmentOf(t, c, msg[c.ID.String()])
	if attB["attachment_id"] == attC["attachment_id"] || attB["sha256"] != hexSHA(data) || attC["sha256"] != hexSHA(data) {
		t.Fatalf("copies: %v %v", attB, attC)
	}
	if n := dbInt(t, e, `SELECT count(DISTINCT attachment_id) FROM attachment_chunks`); n != 2 {
		t.Fatalf("%d attachments hold bytes", n)
	}
	// F = 1: a's next attachment DM to b removes b's copy only.
	w.settings(map[string]any{"channel_attachment_cap": 1})
	sendFile(t, a, dmTo(b), "newer", "newer.txt", []byte("newer"))
	if resp, _ := download(t, b, attB["attachment_id"].(string)); resp.StatusCode != 404 {
		t.Fatalf("b's old copy: %d", resp.StatusCode)
	}
	if resp, body := download(t, c, attC["attachment_id"].(string)); resp.StatusCode != 200 || !bytes.Equal(body, data) {
		t.Fatalf("c's copy after b's retention: %d", resp.StatusCode)
	}
	if resp, _ := download(t, a, attC["attachment_id"].(string)); resp.StatusCode != 200 {
		t.Fatalf("the sender reads c's copy: %d", resp.StatusCode)
	}
}

// Lowering attachment_max_bytes or channel_attachment_cap applies retroactively through the
// recorded cleanup job; an attachment deleted for a limit takes its whole message with it
// (attention, receipts, leases, requests, duplicate reference).
func TestAttachmentRetroactiveCleanup(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "a", "b")
	a, b, e := w.agents["a"], w.agents["b"], w.e
	big := upload(t, a, "/messages", map[string]any{"destination": dmTo(b), "body_md": "big", "request_agent_ids": []any{b.ID}, "idempotency_key": newKey()},
		"big.bin", "application/octet-stream", bytes.Repeat([]byte("b"), 5000))
	if big.Status != 200 {
		t.Fatalf("send: %s", big.Raw)
	}
	bigID := big.JSON()["message_id"].(string)
	small := sendFile(t, a, dmTo(b), "small", "small.bin", []byte("s"))
	ibList(t, b, ibPath("", nil, "", 0))       // receipts on both
	ibClaim(t, b, map[string]any{"limit": 10}) // and leases
	// b's latest message in the pair is oversized too: its duplicate reference must go with it.
	bBig := upload(t, b, "/messages", map[string]any{"destination": dmTo(a), "body_md": "big back", "idempotency_key": newKey()},
		"big.bin", "application/octet-stream", bytes.Repeat([]byte("b"), 5000))
	if bBig.Status != 200 {
		t.Fatalf("send: %s", bBig.Raw)
	}
	runs := e.Admin("GET", "/boxes/alpha/cleanup", nil)["runs"].(float64)

	w.settings(map[string]any{"attachment_max_bytes": 4000})
	st := e.Admin("GET", "/boxes/alpha/cleanup", nil)
	if st["runs"] != runs+1 || st["deleted_messages"] != float64(2) {
		t.Fatalf("cleanup status: %v", st)
	}
	for q, want := range map[string]int64{
		`SELECT count(*) FROM messages WHERE message_id = '` + bigID + `'`:                           0,
		`SELECT count(*) FROM attachments`:                                                           1,
		`SELECT count(*) FROM attention WHERE message_id = '` + bigID + `'`:                          0,
		`SELECT count(*) FROM channel_sender_latest WHERE sender_agent_id = '` + b.ID.String() + `'`: 0,
		`SELECT count(*) FROM requests`:                                                              0,
		`SELECT count(*) FROM receipts`:                                                              1,
		`SELECT count(*) FROM attachment_chunks c JOIN attachments a USING (attachment_id)`:          1,
		`SELECT count(*) FROM attachment_chunks`:                                                     1,
	} {
		if n := dbInt(t, e, q); n != want {
			t.Fatalf("%s: %d, want %d", q, n, want)
		}
	}
	// The purged message's duplicate reference went with it: a's latest in the channel was
	// "small" (kept), so only that reference remains and repeating it is still a duplicate.
	// b's reference to its own message is untouched.
	if n := dbInt(t, e, `SELECT count(*) FROM channel_sender_latest l WHERE NOT EXISTS (SELECT 1 FROM messages m WHERE m.message_id = l.message_id)`); n != 0 {
		t.Fatalf("%d duplicate references to purged messages", n)
	}
	if r := upload(t, b, "/messages", map[string]any{"destination": dmTo(a), "body_md": "big back", "idempotency_key": newKey()},
		"big.bin", "application/octet-stream", bytes.Repeat([]byte("b"), 3000)); r.JSON()["status"] != "sent" {
		t.Fatalf("b's send after its reference was purged: %s", r.Raw)
	}
	if r := upload(t, a, "/messages", map[string]any{"destination": dmTo(b), "body_md": "small", "idempotency_key": newKey()}, "small.bin", "text/plain", []byte("s")); r.JSON()["status"] != "duplicate" || r.JSON()["message_id"] != small {
		t.Fatalf("duplicate after cleanup: %s", r.Raw)
	}
	// F lowered to 0 removes the remaining attachment message, whole.
	w.settings(map[string]any{"channel_attachment_cap": 0})
	if n := dbInt(t, e, `SELECT count(*) FROM messages`); n != 0 {
		t.Fatalf("%d messages after F = 0", n)
	}
	if n := dbInt(t, e, `SELECT count(*) FROM channel_sender_latest`); n != 0 {
		t.Fatalf("duplicate reference survived its message")
	}
}

// A 50 MiB download streams: the process's heap grows by less than 10 MiB while it runs.
// Not parallel, so no other test allocates meanwhile; the GC runs eagerly during the
// measurement so the samples show what the download holds, not garbage awaiting collection.
func TestAttachmentDownloadStreams(t *testing.T) {
	w := newWorld(t, "a", "b")
	a, b := w.agents["a"], w.agents["b"]
	const size = 50 << 20
	w.settings(map[string]any{"attachment_max_bytes": size, "upload_temp_max_bytes": 2 * size})
	pattern := func(i int64) byte { return byte(i*7 + i>>12) }
	fill := func(p []byte, off int64) {
		for i := range p {
			p[i] = pattern(off + int64(i))
		}
	}
	// Upload from a generator through a pipe (the test never holds the file either).
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	want := sha256.New()
	go func() {
		in, _ := json.Marshal(map[string]any{"destination": dmTo(b), "body_md": "big", "idempotency_key": newKey()})
		mw.WriteField("input", string(in))
		fw, _ := mw.CreateFormFile("file", "big.bin")
		buf := make([]byte, 64<<10)
		for off := int64(0); off < size; off += int64(len(buf)) {
			fill(buf, off)
			fw.Write(buf)
			want.Write(buf)
		}
		mw.Close()
		pw.Close()
	}()
	req, _ := http.NewRequest("POST", a.Env.URL+"/api/v1/boxes/alpha/messages", pr)
	req.Header.Set("Authorization", "Bearer "+a.Key)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("upload: %d %s", resp.StatusCode, raw)
	}
	var sent struct {
		MessageID string `json:"message_id"`
	}
	json.Unmarshal(raw, &sent)
	att := attachmentOf(t, b, sent.MessageID)
	wantSHA := hex.EncodeToString(want.Sum(nil))
	if att["sha256"] != wantSHA || att["size_bytes"] != float64(size) {
		t.Fatalf("stored: %v", att)
	}

	defer debug.SetGCPercent(debug.SetGCPercent(10))
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapAlloc
	var peak uint64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		var m runtime.MemStats
		for {
			runtime.ReadMemStats(&m)
			peak = max(peak, m.HeapAlloc)
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
		}
	}()
	dreq, _ := http.NewRequest("GET", a.Env.URL+"/api/v1/boxes/alpha/attachments/"+att["attachment_id"].(string), nil)
	dreq.Header.Set("Authorization", "Bearer "+b.Key)
	dresp, err := http.DefaultClient.Do(dreq)
	if err != nil {
		t.Fatal(err)
	}
	got := sha256.New()
	n, err := io.CopyBuffer(got, dresp.Body, make([]byte, 32<<10))
	dresp.Body.Close()
	close(stop)
	wg.Wait()
	if err != nil || n != size || hex.EncodeToString(got.Sum(nil)) != wantSHA {
		t.Fatalf("download: %d bytes, %v", n, err)
	}
	growth := int64(peak) - int64(base)
	t.Logf("heap growth during a 50 MiB download: %.2f MiB", float64(growth)/(1<<20))
	if growth >= 10<<20 {
		t.Fatalf("heap grew by %d bytes during the download", growth)
	}
}

// A multipart filename's directory part is dropped (RFC 7578 §4.2), whichever separator the
// client used, and the media type is stored lowercased: the name and type the message shows.
func TestAttachmentNameWithoutDirectory(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "a", "b")
	a, b := w.agents["a"], w.agents["b"]
	for _, c := range []struct{ sent, stored string }{
		{`../../etc/passwd`, "passwd"}, {`a/b.txt`, "b.txt"}, {`C:\\x\\y.txt`, "y.txt"}, {`plain.txt`, "plain.txt"},
	} {
		r := rawUpload(t, a, map[string]any{"destination": dmTo(b), "body_md": "file " + c.stored, "idempotency_key": newKey()},
			`form-data; name="file"; filename="`+c.sent+`"`)
		if r.Status != http.StatusOK {
			t.Fatalf("%s: %d %s", c.sent, r.Status, r.Raw)
		}
		m := a.MustCall("GET", "/messages/"+r.JSON()["message_id"].(string), nil)
		att, _ := m["attachment"].(map[string]any)
		if att["name"] != c.stored || att["media_type"] != "text/plain" {
			t.Errorf("%s: stored as %v, want %s", c.sent, att, c.stored)
		}
	}
}
