package upload

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/google/uuid"

	"github.com/agentbox/agentbox/internal/apierr"
)

// Temporary files a crashed process left behind are removed when the next process starts;
// the directory of a live process (its lock held) is left alone.
func TestCrashLeftFilesRemovedAtStart(t *testing.T) {
	root := t.TempDir()
	live, err := NewStager(root)
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	liveFile := filepath.Join(live.Dir(), "upload-live.part")
	if err := os.WriteFile(liveFile, []byte("in flight"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A crashed process: its lock file exists but nobody holds it; another died before
	// creating its lock.
	for _, dead := range []struct {
		dir  string
		lock bool
	}{{"p1-dead", true}, {"p2-nolock", false}} {
		dir := filepath.Join(root, dead.dir)
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if dead.lock {
			os.WriteFile(filepath.Join(dir, lockName), nil, 0o600)
		}
		if err := os.WriteFile(filepath.Join(dir, "upload-123.part"), []byte("half an upload"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	next, err := NewStager(root)
	if err != nil {
		t.Fatal(err)
	}
	defer next.Close()
	for _, gone := range []string{"p1-dead", "p2-nolock"} {
		if _, err := os.Stat(filepath.Join(root, gone)); !os.IsNotExist(err) {
			t.Fatalf("%s survived the start: %v", gone, err)
		}
	}
	if _, err := os.Stat(liveFile); err != nil {
		t.Fatalf("a live process's file was removed: %v", err)
	}
	entries, _ := os.ReadDir(next.Dir())
	if len(entries) != 1 || entries[0].Name() != lockName {
		t.Fatalf("a new staging directory holds %v", entries)
	}
}

func TestValidName(t *testing.T) {
	for name, ok := range map[string]bool{"a.txt": true, "ü ñ.pdf": true, "": false, ".": false, "..": false,
		"a/b": false, `a\b`: false, "a\x00b": false, "a\nb": false, string(make([]byte, 256)): false,
		"\u202etxt.exe": false, "a\u2066b": false, "a\u200fb": false} {
		if ValidName(name) != ok {
			t.Errorf("ValidName(%q) = %v", name, !ok)
		}
	}
}

func TestBaseName(t *testing.T) {
	for in, want := range map[string]string{"a.txt": "a.txt", "../../etc/passwd": "passwd", `C:\x\y.txt`: "y.txt", "dir/": "", "": ""} {
		if got := BaseName(in); got != want {
			t.Errorf("BaseName(%q) = %q, want %q", in, got, want)
		}
	}
}

// stager is a fresh Stager for a test.
func stager(t *testing.T) *Stager {
	t.Helper()
	s, err := NewStager(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// wantErr asserts an *apierr.Error's code, reason, retryability, field and limit (-1: none).
func wantErr(t *testing.T, what string, err error, code apierr.Code, reason string, limit int64) {
	t.Helper()
	e, ok := apierr.As(err)
	if !ok || e.Code != code || e.Reason != reason || e.Retryable != code.Retryable() {
		t.Fatalf("%s: %v", what, err)
	}
	if code == apierr.LimitExceeded && (e.Field != "file" || e.Limit == nil || *e.Limit != limit || e.RetryAfterSeconds != nil) {
		t.Fatalf("%s: field %q limit %v retry %v", what, e.Field, e.Limit, e.RetryAfterSeconds)
	}
	if code == apierr.RateLimited && (e.RetryAfterSeconds == nil || *e.RetryAfterSeconds != RetryAfterSeconds) {
		t.Fatalf("%s: no retry hint", what)
	}
}

// staged lists the staging directory besides the lock.
func staged(t *testing.T, s *Stager) []string {
	t.Helper()
	entries, err := os.ReadDir(s.Dir())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if e.Name() != lockName {
			out = append(out, e.Name())
		}
	}
	return out
}

// upload_concurrency_max 0 (or channel_attachment_cap 0) admits nothing: LIMIT_EXCEEDED uploads_disabled (never the
// retryable RATE_LIMITED), counted, nothing reserved.
func TestAdmitUploadsDisabled(t *testing.T) {
	s := stager(t)
	box := uuid.New()
	_, err := s.Admit(box, Limits{MaxBytes: 1000, TempMaxBytes: 1000, ConcurrencyMax: 0}, 10)
	wantErr(t, "concurrency 0", err, apierr.LimitExceeded, ReasonDisabled, 0)
	if len(s.boxes) != 0 || s.inProgress.Load() != 0 || s.rejected[ReasonDisabled] != 1 {
		t.Fatalf("state after refusal: %v %d %v", s.boxes, s.inProgress.Load(), s.rejected)
	}
	// channel_attachment_cap 0: the box keeps no attachment, so none is staged.
	_, err = s.Admit(box, Limits{MaxBytes: 1000, TempMaxBytes: 1000, ConcurrencyMax: 4, KeepsNoAttachments: true}, 10)
	wantErr(t, "channel_attachment_cap 0", err, apierr.LimitExceeded, ReasonDisabled, 0)
	if len(s.boxes) != 0 || s.inProgress.Load() != 0 || s.rejected[ReasonDisabled] != 2 {
		t.Fatalf("state after refusal: %v %d %v", s.boxes, s.inProgress.Load(), s.rejected)
	}
}

// A file larger than upload_temp_max_bytes (within attachment_max_bytes) is admitted with a
// reservation capped at the box's temporary space, declared or not, and refused while it
// streams as LIMIT_EXCEEDED upload_too_large_for_box, never staging more than its
// reservation; the file is removed and the reservation returned.
func TestStageTooLargeForBox(t *testing.T) {
	s := stager(t)
	box := uuid.New()
	lim := Limits{MaxBytes: 10 << 20, TempMaxBytes: 1000, ConcurrencyMax: 4}
	for _, declared := range []int64{2200, -1} {
		slot, err := s.Admit(box, lim, declared)
		if err != nil {
			t.Fatalf("declared %d: a lone upload is refused at admission: %v", declared, err)
		}
		if slot.reserved != 1000 {
			t.Fatalf("declared %d: reserved %d", declared, slot.reserved)
		}
		_, err = slot.Stage(bytes.NewReader(make([]byte, 2000)), "big.bin", "application/octet-stream")
		wantErr(t, "2000 bytes", err, apierr.LimitExceeded, ReasonTooLargeForBox, 1000)
		if n := slot.file.SizeBytes; n > 1000 {
			t.Fatalf("staged %d bytes, past the reservation", n)
		}
		if files := staged(t, s); len(files) != 0 || s.tempBytes.Load() != 0 {
			t.Fatalf("after the refusal: %v, %d temporary bytes", files, s.tempBytes.Load())
		}
		slot.Release()
	}
	if len(s.boxes) != 0 || s.inProgress.Load() != 0 {
		t.Fatalf("reservations left: %v", s.boxes)
	}
	// Exactly the box's temporary space fits.
	slot, err := s.Admit(box, lim, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer slot.Release()
	if f, err := slot.Stage(bytes.NewReader(make([]byte, 1000)), "fits.bin", "application/octet-stream"); err != nil || f.SizeBytes != 1000 {
		t.Fatalf("exactly upload_temp_max_bytes: %v", err)
	}
}

// Both caps equal: a file at the cap is staged within a reservation of the cap (its
// detection byte is never written); one byte more names attachment_max_bytes, the cap that
// applies wherever the file is sent. The smaller attachment_max_bytes is named likewise.
func TestStageNamesTheSmallerCap(t *testing.T) {
	s := stager(t)
	box := uuid.New()
	for _, tc := range []struct {
		lim   Limits
		size  int
		limit int64
	}{
		{Limits{MaxBytes: 1000, TempMaxBytes: 1000, ConcurrencyMax: 1}, 1000, -1},
		{Limits{MaxBytes: 1000, TempMaxBytes: 1000, ConcurrencyMax: 1}, 1001, 1000},
		{Limits{MaxBytes: 500, TempMaxBytes: 1000, ConcurrencyMax: 1}, 2000, 500},
	} {
		slot, err := s.Admit(box, tc.lim, -1)
		if err != nil {
			t.Fatalf("%+v: %v", tc.lim, err)
		}
		_, err = slot.Stage(bytes.NewReader(make([]byte, tc.size)), "f.bin", "application/octet-stream")
		if tc.limit < 0 {
			if err != nil {
				t.Fatalf("%+v, %d bytes: %v", tc.lim, tc.size, err)
			}
		} else {
			wantErr(t, "over the attachment cap", err, apierr.LimitExceeded, ReasonTooLarge, tc.limit)
		}
		if n := slot.file.SizeBytes; n > slot.reserved || slot.reserved > tc.lim.MaxBytes {
			t.Fatalf("staged %d bytes, reservation %d", n, slot.reserved)
		}
		slot.Release()
	}
}

// Refused only because the box's other uploads hold the slot or the bytes: RATE_LIMITED with
// retry_after_seconds, and admitted once they finish.
func TestAdmitBusyIsRetryable(t *testing.T) {
	s := stager(t)
	box := uuid.New()
	for _, tc := range []struct {
		lim    Limits
		reason string
	}{
		{Limits{MaxBytes: 1000, TempMaxBytes: 10000, ConcurrencyMax: 1}, ReasonConcurrency},
		{Limits{MaxBytes: 1000, TempMaxBytes: 1500, ConcurrencyMax: 5}, ReasonTempBytes},
		// Undeclared sizes reserve the whole (smaller) temporary space.
		{Limits{MaxBytes: 10 << 20, TempMaxBytes: 1000, ConcurrencyMax: 5}, ReasonTempBytes},
	} {
		first, err := s.Admit(box, tc.lim, -1)
		if err != nil {
			t.Fatalf("%+v: first: %v", tc.lim, err)
		}
		_, err = s.Admit(box, tc.lim, 900)
		wantErr(t, tc.reason, err, apierr.RateLimited, tc.reason, 0)
		// Another box is not affected.
		other, err := s.Admit(uuid.New(), tc.lim, 900)
		if err != nil {
			t.Fatalf("another box: %v", err)
		}
		other.Release()
		first.Release()
		again, err := s.Admit(box, tc.lim, 900)
		if err != nil {
			t.Fatalf("%+v: after the first finished: %v", tc.lim, err)
		}
		again.Release()
	}
}

// fullDisk is a staged file's writer on a disk that has room for left more bytes: past
// them, a write fails as a full disk does (ENOSPC).
type fullDisk struct {
	w    io.Writer
	left int
}

func (d *fullDisk) Write(p []byte) (int, error) {
	n, err := d.w.Write(p[:min(len(p), d.left)])
	d.left -= n
	if err == nil && n < len(p) {
		err = &os.PathError{Op: "write", Path: "upload-x.part", Err: syscall.ENOSPC}
	}
	return n, err
}

// brokenBody is a client's body that breaks off after some bytes.
type brokenBody struct{ n int }

func (b *brokenBody) Read(p []byte) (int, error) {
	if b.n == 0 {
		return 0, io.ErrUnexpectedEOF
	}
	n := min(len(p), b.n)
	b.n -= n
	return n, nil
}

// stagingFailure asserts err is the server's staging failure, op and errno, with the file
// removed and no temporary bytes counted.
func stagingFailure(t *testing.T, what string, s *Stager, err error, op string, errno syscall.Errno) {
	t.Helper()
	var se *StagingError
	if !errors.As(err, &se) || se.Op != op || se.Dir != s.Dir() || se.Errno() != errno {
		t.Fatalf("%s: want a staging %s failure (%v), got %#v", what, op, errno, err)
	}
	if _, ok := apierr.As(err); ok {
		t.Fatalf("%s: a staging failure is already an API error: %v", what, err)
	}
	if s.tempBytes.Load() != 0 {
		t.Fatalf("%s: %d temporary bytes still counted", what, s.tempBytes.Load())
	}
}

// The server's storage failing while a file is staged — the temporary file cannot be
// created (its directory replaced by a regular file: ENOTDIR) or written (a full disk:
// ENOSPC) — is a *StagingError naming the directory, the operation and the errno, whose
// answer is TEMPORARILY_UNAVAILABLE upload_staging_failed (retryable); nothing is left
// behind. A body the client breaks off is returned as it is, never as a staging failure.
func TestStageStorageFailureIsTheServers(t *testing.T) {
	s := stager(t)
	box := uuid.New()
	lim := Limits{MaxBytes: 10 << 20, TempMaxBytes: 10 << 20, ConcurrencyMax: 4}
	stage := func(r io.Reader) error {
		t.Helper()
		slot, err := s.Admit(box, lim, -1)
		if err != nil {
			t.Fatal(err)
		}
		defer slot.Release()
		_, err = slot.Stage(r, "f.bin", "application/octet-stream")
		return err
	}

	// A full disk: 3 MB into room for 2 MiB.
	s.wrapWrite = func(w io.Writer) io.Writer { return &fullDisk{w: w, left: 2 << 20} }
	err := stage(bytes.NewReader(make([]byte, 3_000_000)))
	stagingFailure(t, "full disk", s, err, "write", syscall.ENOSPC)
	if files := staged(t, s); len(files) != 0 {
		t.Fatalf("full disk: files left: %v", files)
	}
	s.wrapWrite = nil

	// The directory replaced by a regular file: nothing can be created in it.
	dir := s.Dir()
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dir, []byte("not a directory"), 0o600); err != nil {
		t.Fatal(err)
	}
	err = stage(bytes.NewReader([]byte("data")))
	stagingFailure(t, "directory replaced by a file", s, err, "create", syscall.ENOTDIR)
	if got, _ := os.ReadFile(dir); string(got) != "not a directory" {
		t.Fatalf("the file in the directory's place was changed: %q", got)
	}

	ae := StagingFailed()
	if ae.Code != apierr.TemporarilyUnavailable || !ae.Retryable || ae.Reason != ReasonStagingFailed || ae.Field != "" ||
		!strings.Contains(ae.SuggestedAction, "idempotency_key") || ae.HTTPStatus() != http.StatusServiceUnavailable {
		t.Fatalf("the answer: %+v", ae)
	}

	// Once the path is free again the next upload recreates the directory and is staged.
	if err := os.Remove(dir); err != nil {
		t.Fatal(err)
	}
	if err := stage(bytes.NewReader([]byte("data"))); err != nil {
		t.Fatalf("after the path was freed: %v", err)
	}

	// The client's body breaking off: its own error, not the server's storage.
	err = stage(&brokenBody{n: 100 << 10})
	var se *StagingError
	if !errors.Is(err, io.ErrUnexpectedEOF) || errors.As(err, &se) {
		t.Fatalf("a broken body: %#v", err)
	}
	if files := staged(t, s); len(files) != 0 || s.tempBytes.Load() != 0 {
		t.Fatalf("after a broken body: %v, %d temporary bytes", files, s.tempBytes.Load())
	}
}

// The process directory removed while the process runs (a /tmp cleaner, with its root or
// alone) is recreated by the next upload, which is staged: mode 0700 as at start, and locked
// again, so a process starting on the same root leaves it (and its files) alone. Concurrent
// uploads recreate it once, all staged.
func TestStageRecreatesRemovedDirectory(t *testing.T) {
	root := t.TempDir()
	s, err := NewStager(root)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	box := uuid.New()
	lim := Limits{MaxBytes: 1000, TempMaxBytes: 100000, ConcurrencyMax: 20}
	for _, removed := range []string{s.Dir(), root} {
		if err := os.RemoveAll(removed); err != nil {
			t.Fatal(err)
		}
		slot, err := s.Admit(box, lim, -1)
		if err != nil {
			t.Fatal(err)
		}
		f, err := slot.Stage(bytes.NewReader([]byte("after the cleaner")), "f.txt", "text/plain")
		if err != nil {
			t.Fatalf("%s removed: the next upload: %v", removed, err)
		}
		if r, err := f.Reader(); err != nil {
			t.Fatal(err)
		} else if got, _ := io.ReadAll(r); string(got) != "after the cleaner" {
			t.Fatalf("%s removed: staged %q", removed, got)
		}
		for _, d := range []string{removed, s.Dir()} { // a root that was there is left as it was
			if st, err := os.Stat(d); err != nil || st.Mode().Perm() != 0o700 || !st.IsDir() {
				t.Fatalf("%s removed: %s recreated as %v, %v", removed, d, st, err)
			}
		}
		// Another process starting on the root finds the directory in use.
		other, err := NewStager(root)
		if err != nil {
			t.Fatal(err)
		}
		other.Close()
		if files := staged(t, s); len(files) != 1 {
			t.Fatalf("%s removed: a starting process took the recreated directory for abandoned: %v", removed, files)
		}
		slot.Release()
	}

	if err := os.RemoveAll(s.Dir()); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 10)
	for range 10 {
		wg.Go(func() {
			slot, err := s.Admit(box, lim, -1)
			if err != nil {
				errs <- err
				return
			}
			defer slot.Release()
			if _, err := slot.Stage(bytes.NewReader([]byte("concurrent")), "c.txt", "text/plain"); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("concurrent uploads after the removal: %v", err)
	}
	if entries, err := os.ReadDir(s.Dir()); err != nil || len(entries) != 1 || entries[0].Name() != lockName {
		t.Fatalf("after the concurrent uploads: %v, %v", entries, err)
	}
}
