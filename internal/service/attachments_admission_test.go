package service_test

import (
	"bytes"
	"io"
	"mime/multipart"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/testenv"
)

// Upload admission (SPEC §11, §12): an upload that can never be admitted in its box — its
// file alone is larger than upload_temp_max_bytes, or upload_concurrency_max is 0 — is
// LIMIT_EXCEEDED (not retryable), never RATE_LIMITED; only an upload that would be admitted
// once the box's other uploads finish is RATE_LIMITED with retry_after_seconds.

// chunkedUpload sends an upload without Content-Length (its size is known only as it streams).
func chunkedUpload(t *testing.T, a *testenv.Agent, input any, name string, data []byte) testenv.Response {
	t.Helper()
	ct, body := multipartBody(t, input, name, "application/octet-stream", data)
	req, _ := http.NewRequest("POST", a.Env.URL+"/api/v1/boxes/"+a.BoxKey+"/messages", struct{ io.Reader }{bytes.NewReader(body)})
	req.Header.Set("Authorization", "Bearer "+a.Key)
	req.Header.Set("Content-Type", ct)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return testenv.Response{Status: resp.StatusCode, Raw: raw}
}

// errorObject is the error object of a response.
func errorObject(t *testing.T, r testenv.Response) map[string]any {
	t.Helper()
	e, ok := r.JSON()["error"].(map[string]any)
	if !ok {
		t.Fatalf("not an error: %d %s", r.Status, r.Raw)
	}
	return e
}

// final asserts a refusal the client must not retry: 422 LIMIT_EXCEEDED on the file part with
// the limit published, no retry hint, the rejected size never echoed.
func final(t *testing.T, what string, r testenv.Response, reason string, limit int64, size int) {
	t.Helper()
	e := errorObject(t, r)
	if r.Status != http.StatusUnprocessableEntity || e["code"] != "LIMIT_EXCEEDED" || e["reason"] != reason || e["field"] != "file" ||
		e["retryable"] != false || e["limit"] != float64(limit) || e["retry_after_seconds"] != nil {
		t.Fatalf("%s: %d %s", what, r.Status, r.Raw)
	}
	if msg, _ := e["message"].(string); strings.Contains(strings.ToLower(msg), "retry") || (size > 0 && strings.Contains(string(r.Raw), strconv.Itoa(size))) {
		t.Fatalf("%s: the message invites a retry or echoes the size: %s", what, r.Raw)
	}
}

// retryable asserts a refusal that clears once the box's other uploads finish.
func retryable(t *testing.T, what string, r testenv.Response, reason string) {
	t.Helper()
	e := errorObject(t, r)
	if r.Status != http.StatusTooManyRequests || e["code"] != "RATE_LIMITED" || e["reason"] != reason ||
		e["retryable"] != true || e["retry_after_seconds"] != float64(1) {
		t.Fatalf("%s: %d %s", what, r.Status, r.Raw)
	}
}

// noStaging asserts the staging directory is empty and the gauges are back to zero.
func noStaging(t *testing.T, e *testenv.Env, what string) {
	t.Helper()
	waitFor(t, what+": uploads to end", func() bool { return metric(t, e, "agentbox_uploads_in_progress") == "0" })
	if files := tempFiles(t, e); len(files) != 0 {
		t.Fatalf("%s: temporary files left: %v", what, files)
	}
	if v := metric(t, e, "agentbox_upload_temp_bytes"); v != "0" {
		t.Fatalf("%s: temporary bytes still counted: %s", what, v)
	}
}

// A file larger than upload_temp_max_bytes (and within attachment_max_bytes) can never be
// admitted in its box: LIMIT_EXCEEDED upload_too_large_for_box with the limit, declared or
// streamed alike, after authentication, writing nothing and freeing its temporary space. A
// file that fits the box's temporary space exactly is stored; where attachment_max_bytes is
// the smaller cap, it is the one named.
func TestAttachmentTooLargeForBox(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "a", "b")
	a, b, e := w.agents["a"], w.agents["b"], w.e
	w.settings(map[string]any{"upload_temp_max_bytes": 1000}) // attachment_max_bytes stays 10 MiB
	in := func() map[string]any {
		return map[string]any{"destination": dmTo(b), "body_md": "x", "idempotency_key": newKey()}
	}
	big := bytes.Repeat([]byte("z"), 2000)

	// Authentication first: a bad key is AUTH_FAILED, not a verdict on the file.
	bad := *a
	bad.Key = a.Key[:len(a.Key)-1] + "x"
	if r := upload(t, &bad, "/messages", in(), "big.bin", "application/octet-stream", big); r.Code() != "AUTH_FAILED" {
		t.Fatalf("bad key: %d %s", r.Status, r.Raw)
	}

	declared := in()
	r := rejects(t, e, "declared 2000 bytes", func() testenv.Response {
		return upload(t, a, "/messages", declared, "big.bin", "application/octet-stream", big)
	}, "LIMIT_EXCEEDED", "upload_too_large_for_box", "file")
	final(t, "declared", r, "upload_too_large_for_box", 1000, len(big))
	noStaging(t, e, "declared")
	// A compliant client that retries anyway (same key) gets the same answer, not a slot.
	r = rejects(t, e, "the same upload again", func() testenv.Response {
		return upload(t, a, "/messages", declared, "big.bin", "application/octet-stream", big)
	}, "LIMIT_EXCEEDED", "upload_too_large_for_box", "file")
	final(t, "again", r, "upload_too_large_for_box", 1000, len(big))

	r = rejects(t, e, "streamed 2000 bytes", func() testenv.Response {
		return chunkedUpload(t, a, in(), "big.bin", big)
	}, "LIMIT_EXCEEDED", "upload_too_large_for_box", "file")
	final(t, "streamed", r, "upload_too_large_for_box", 1000, len(big))
	noStaging(t, e, "streamed")
	if v := metric(t, e, `agentbox_uploads_rejected_total{reason="upload_too_large_for_box"}`); v != "3" {
		t.Fatalf("rejected metric: %q", v)
	}
	if v := metric(t, e, `agentbox_uploads_rejected_total{reason="upload_temp_bytes_exceeded"}`); v != "" {
		t.Fatalf("refused as busy: %q", v)
	}

	// Exactly the box's temporary space fits, declared (its request is larger than the
	// file) or streamed.
	exact := bytes.Repeat([]byte("e"), 1000)
	if r := upload(t, a, "/messages", in(), "exact.bin", "application/octet-stream", exact); r.Status != http.StatusOK {
		t.Fatalf("declared, exactly upload_temp_max_bytes: %d %s", r.Status, r.Raw)
	}
	if r := chunkedUpload(t, a, in(), "exact2.bin", append(exact[:999:999], 'f')); r.Status != http.StatusOK {
		t.Fatalf("streamed, exactly upload_temp_max_bytes: %d %s", r.Status, r.Raw)
	}
	noStaging(t, e, "exact")

	// Both caps equal: a file at the cap is stored (its detection byte is never staged), one
	// byte more is attachment_too_large.
	w.settings(map[string]any{"attachment_max_bytes": 1000, "upload_temp_max_bytes": 1000})
	if r := upload(t, a, "/messages", in(), "eq.bin", "application/octet-stream", bytes.Repeat([]byte("q"), 1000)); r.Status != http.StatusOK {
		t.Fatalf("at both caps: %d %s", r.Status, r.Raw)
	}
	r = rejects(t, e, "one byte over both caps", func() testenv.Response {
		return upload(t, a, "/messages", in(), "eq.bin", "application/octet-stream", bytes.Repeat([]byte("q"), 1001))
	}, "LIMIT_EXCEEDED", "attachment_too_large", "file")
	final(t, "over both", r, "attachment_too_large", 1000, 0)
	// attachment_max_bytes the smaller cap: it is the one named.
	w.settings(map[string]any{"attachment_max_bytes": 500, "upload_temp_max_bytes": 1000})
	r = rejects(t, e, "over the smaller attachment cap", func() testenv.Response {
		return chunkedUpload(t, a, in(), "big.bin", big)
	}, "LIMIT_EXCEEDED", "attachment_too_large", "file")
	final(t, "attachment cap", r, "attachment_too_large", 500, len(big))
	noStaging(t, e, "caps")
}

// upload_concurrency_max 0 (the settings allow it) admits no upload of the box:
// LIMIT_EXCEEDED uploads_disabled before any byte is staged, after authentication; sends
// without a file are unaffected, and raising the setting admits uploads again.
func TestAttachmentUploadsDisabled(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "a", "b")
	a, b, e := w.agents["a"], w.agents["b"], w.e
	w.settings(map[string]any{"upload_concurrency_max": 0})
	in := func() map[string]any {
		return map[string]any{"destination": dmTo(b), "body_md": "x", "idempotency_key": newKey()}
	}
	bad := *a
	bad.Key = a.Key[:len(a.Key)-1] + "x"
	if r := upload(t, &bad, "/messages", in(), "f.txt", "text/plain", []byte("f")); r.Code() != "AUTH_FAILED" {
		t.Fatalf("bad key: %d %s", r.Status, r.Raw)
	}
	for _, tc := range []struct {
		name string
		do   func() testenv.Response
	}{
		{"declared", func() testenv.Response { return upload(t, a, "/messages", in(), "f.txt", "text/plain", []byte("f")) }},
		{"streamed", func() testenv.Response { return chunkedUpload(t, a, in(), "f.txt", []byte("f")) }},
		{"batch", func() testenv.Response {
			return upload(t, a, "/messages/batch", map[string]any{"recipient_agent_ids": []any{b.ID}, "body_md": "", "idempotency_key": newKey()},
				"f.txt", "text/plain", []byte("f"))
		}},
	} {
		r := rejects(t, e, tc.name, tc.do, "LIMIT_EXCEEDED", "uploads_disabled", "file")
		final(t, tc.name, r, "uploads_disabled", 0, 0)
		noStaging(t, e, tc.name)
	}
	if v := metric(t, e, `agentbox_uploads_rejected_total{reason="uploads_disabled"}`); v != "3" {
		t.Fatalf("rejected metric: %q", v)
	}
	if r := a.Call("POST", "/messages", in()); r.Status != http.StatusOK || r.JSON()["status"] != "sent" {
		t.Fatalf("a send without a file: %d %s", r.Status, r.Raw)
	}
	w.settings(map[string]any{"upload_concurrency_max": 1})
	sendFile(t, a, dmTo(b), "enabled again", "f.txt", []byte("f"))

	// channel_attachment_cap 0: retention would delete the message in the send that stored it
	// (it answered "sent" with a message that no longer existed); refused the same way, and
	// nothing is written.
	w.settings(map[string]any{"channel_attachment_cap": 0})
	var messages int
	count := func() int {
		if err := e.Store.Pool().QueryRow(t.Context(), `SELECT count(*) FROM messages`).Scan(&messages); err != nil {
			t.Fatal(err)
		}
		return messages
	}
	before := count()
	r := rejects(t, e, "channel_attachment_cap 0", func() testenv.Response {
		return upload(t, a, "/messages", in(), "f.txt", "text/plain", []byte("f"))
	}, "LIMIT_EXCEEDED", "uploads_disabled", "file")
	final(t, "channel_attachment_cap 0", r, "uploads_disabled", 0, 0)
	noStaging(t, e, "channel_attachment_cap 0")
	if n := count(); n != before {
		t.Fatalf("a refused upload wrote %d messages", n-before)
	}
}

// waitStaging waits until n uploads are staging; a slow upload that answers first fails.
func waitStaging(t *testing.T, e *testenv.Env, n int, done <-chan testenv.Response) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for len(tempFiles(t, e)) < n {
		select {
		case r := <-done:
			t.Fatalf("the in-flight upload answered before staging: %d %s", r.Status, r.Raw)
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("timed out waiting for the in-flight upload to stage")
		}
	}
}

// An upload refused only because others of its box are in flight (holding the concurrency
// slot or the temporary bytes) stays RATE_LIMITED with retry_after_seconds and writes
// nothing; once they finish, the same request with the same idempotency key is stored.
func TestAttachmentBusyStaysRetryable(t *testing.T) {
	t.Parallel()
	l := slowLength(slowInput(&testenv.Agent{}), multipart.NewWriter(io.Discard).Boundary())
	for _, tc := range []struct {
		name     string
		settings map[string]any
		length   bool // the in-flight upload declares its Content-Length
		reason   string
	}{
		{"concurrency slot", map[string]any{"upload_concurrency_max": 1}, true, "upload_concurrency_exceeded"},
		// The in-flight upload reserves its request (l); the next one's request (about l)
		// fits the 1.5 l alone but not beside it.
		{"temporary bytes, declared", map[string]any{"upload_temp_max_bytes": l + l/2}, true, "upload_temp_bytes_exceeded"},
		// Its size unknown, the in-flight upload reserves all the box's temporary space
		// (smaller than attachment_max_bytes) and is admitted.
		{"temporary bytes, streamed", map[string]any{"upload_temp_max_bytes": 2 * l}, false, "upload_temp_bytes_exceeded"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t, "a", "b")
			a, b, e := w.agents["a"], w.agents["b"], w.e
			w.settings(tc.settings)
			release := make(chan struct{})
			var once sync.Once
			defer once.Do(func() { close(release) })
			done := make(chan testenv.Response, 1)
			slowUpload(t, a, b, tc.length, release, done)
			waitStaging(t, e, 1, done)

			in := map[string]any{"destination": dmTo(b), "body_md": "waits", "idempotency_key": newKey()}
			data := make([]byte, slowFileBytes)
			r := rejects(t, e, "beside the in-flight upload", func() testenv.Response {
				return upload(t, a, "/messages", in, "next.bin", "application/octet-stream", data)
			}, "RATE_LIMITED", tc.reason, "")
			retryable(t, "busy", r, tc.reason)

			once.Do(func() { close(release) })
			if r := <-done; r.Status != http.StatusOK {
				t.Fatalf("in-flight upload: %d %s", r.Status, r.Raw)
			}
			// The client's retry, same key.
			r = upload(t, a, "/messages", in, "next.bin", "application/octet-stream", data)
			if r.Status != http.StatusOK || r.JSON()["status"] != "sent" {
				t.Fatalf("retry after the in-flight upload finished: %d %s", r.Status, r.Raw)
			}
			noStaging(t, e, tc.name)
			if n := dbInt(t, e, `SELECT count(*) FROM attachments`); n != 2 {
				t.Fatalf("%d attachments stored", n)
			}
		})
	}
}
