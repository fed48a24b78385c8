package service_test

import (
	"bytes"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/agentbox/agentbox/internal/testenv"
)

// Upload staging storage (SPEC §6, §12): the server's own temporary storage failing is the
// server's fault, never the client's: TEMPORARILY_UNAVAILABLE upload_staging_failed
// (retryable, with the same idempotency_key), logged with the directory and the errno,
// counted under its own rejection reason, nothing stored and nothing left behind. A
// staging directory removed while the server runs (a /tmp cleaner) is recreated by the
// next upload.

// logBuffer is a server log the test reads.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

// lines are the logged lines that contain msg.
func (l *logBuffer) lines(msg string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, line := range strings.Split(l.buf.String(), "\n") {
		if strings.Contains(line, msg) {
			out = append(out, line)
		}
	}
	return out
}

// stagingUnavailable asserts the answer to an upload the server could not stage.
func stagingUnavailable(t *testing.T, what string, r testenv.Response) {
	t.Helper()
	e := errorObject(t, r)
	if r.Status != http.StatusServiceUnavailable || e["code"] != "TEMPORARILY_UNAVAILABLE" || e["reason"] != "upload_staging_failed" ||
		e["retryable"] != true || e["field"] != nil {
		t.Fatalf("%s: %d %s", what, r.Status, r.Raw)
	}
	if s, _ := e["suggested_action"].(string); !strings.Contains(s, "idempotency_key") {
		t.Fatalf("%s: the suggestion does not say how to retry: %s", what, r.Raw)
	}
}

// The staging directory replaced by a regular file (no upload can create its temporary
// file there: ENOTDIR, as root too) answers each upload — message_send and
// message_send_batch — TEMPORARILY_UNAVAILABLE upload_staging_failed, writing nothing and
// leaving no temporary bytes; each failure is logged once with the directory and the errno
// and never the client's file name, input or bytes; /metrics counts it under its own
// reason, never upload_aborted. Once the path is free, the retry with the same
// idempotency_key is sent.
func TestAttachmentStagingFailureIsTheServers(t *testing.T) {
	t.Parallel()
	var logs logBuffer
	e := testenv.New(t, testenv.Options{Log: slog.New(slog.NewTextHandler(&logs, nil))})
	w := &world{e: e, box: e.Box("alpha"), agents: map[string]*testenv.Agent{}}
	a, b := w.agent("a"), w.agent("b")
	dir := e.Uploads.Dir()
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	data := []byte("client secret bytes 7f3a")
	send := map[string]any{"destination": dmTo(b), "body_md": "the body text 91c2", "idempotency_key": newKey()}
	batch := map[string]any{"recipient_agent_ids": []any{b.ID}, "body_md": "", "idempotency_key": newKey()}
	for _, tc := range []struct {
		path  string
		input map[string]any
	}{{"/messages", send}, {"/messages/batch", batch}} {
		r := rejects(t, e, tc.path, func() testenv.Response {
			return upload(t, a, tc.path, tc.input, "report-4b1d.txt", "text/plain", data)
		}, "TEMPORARILY_UNAVAILABLE", "upload_staging_failed", "-")
		stagingUnavailable(t, tc.path, r)
		waitFor(t, tc.path+": the upload to end", func() bool { return metric(t, e, "agentbox_uploads_in_progress") == "0" })
		if v := metric(t, e, "agentbox_upload_temp_bytes"); v != "0" {
			t.Fatalf("%s: temporary bytes still counted: %s", tc.path, v)
		}
	}

	if v := metric(t, e, `agentbox_uploads_rejected_total{reason="upload_staging_failed"}`); v != "2" {
		t.Fatalf("staging failures counted: %q", v)
	}
	for _, m := range []string{`agentbox_uploads_rejected_total{reason="upload_aborted"}`,
		`agentbox_request_errors_total{operation="message_send",transport="http",code="INVALID_ARGUMENT"}`} {
		if v := metric(t, e, m); v != "" {
			t.Fatalf("%s %s", m, v)
		}
	}
	for _, op := range []string{"message_send", "message_send_batch"} {
		if v := metric(t, e, `agentbox_request_errors_total{operation="`+op+`",transport="http",code="TEMPORARILY_UNAVAILABLE"}`); v != "1" {
			t.Fatalf("%s: TEMPORARILY_UNAVAILABLE counted %q", op, v)
		}
	}
	lines := logs.lines("upload staging failed")
	if len(lines) != 2 {
		t.Fatalf("logged %d times: %q", len(lines), lines)
	}
	for _, line := range lines {
		if !strings.Contains(line, "dir="+dir) || !strings.Contains(line, "errno=ENOTDIR") || !strings.Contains(line, "op=create") {
			t.Fatalf("the log line does not say where and how: %s", line)
		}
	}
	for _, private := range []string{"7f3a", "91c2", "4b1d", a.Key} {
		if all := strings.Join(logs.lines(""), "\n"); strings.Contains(all, private) {
			t.Fatalf("the log carries the client's data (%s):\n%s", private, all)
		}
	}

	if err := os.Remove(dir); err != nil {
		t.Fatal(err)
	}
	r := upload(t, a, "/messages", send, "report-4b1d.txt", "text/plain", data)
	if r.Status != http.StatusOK || r.JSON()["status"] != "sent" {
		t.Fatalf("the retry with the same idempotency_key: %d %s", r.Status, r.Raw)
	}
	if att := attachmentOf(t, b, r.JSON()["message_id"].(string)); att["sha256"] != hexSHA(data) {
		t.Fatalf("the retry stored %v", att)
	}
	noStaging(t, e, "after the retry")
}

// The staging directory removed while the server runs — alone, or with the --upload-dir
// root — is recreated by the next upload, which is sent with its bytes intact (the server
// does not fail every upload until a restart); nothing is left behind and nothing is
// counted as rejected.
func TestAttachmentStagingDirectoryRemovedIsRecreated(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "a", "b")
	a, b, e := w.agents["a"], w.agents["b"], w.e
	dir := e.Uploads.Dir()
	for _, removed := range []string{dir, filepath.Dir(dir)} {
		if err := os.RemoveAll(removed); err != nil {
			t.Fatal(err)
		}
		data := []byte("sent after " + removed + " was removed")
		id := sendFile(t, a, dmTo(b), "after the cleaner", "after.txt", data)
		att := attachmentOf(t, b, id)
		if resp, got := download(t, b, att["attachment_id"].(string)); resp.StatusCode != http.StatusOK || !bytes.Equal(got, data) {
			t.Fatalf("%s removed: downloaded %d %q", removed, resp.StatusCode, got)
		}
		if st, err := os.Stat(dir); err != nil || !st.IsDir() || st.Mode().Perm() != 0o700 {
			t.Fatalf("%s removed: the staging directory is %v, %v", removed, st, err)
		}
		r := upload(t, a, "/messages/batch", map[string]any{"recipient_agent_ids": []any{b.ID}, "body_md": "", "idempotency_key": newKey()},
			"batch.txt", "text/plain", data)
		if r.Status != http.StatusOK {
			t.Fatalf("%s removed: a batch upload: %d %s", removed, r.Status, r.Raw)
		}
		noStaging(t, e, removed+" removed")
	}
	if raw := string(e.Do("GET", "/metrics", "", nil, nil).Raw); strings.Contains(raw, "agentbox_uploads_rejected_total{") {
		t.Fatalf("uploads counted as rejected:\n%s", raw)
	}
}
