// Package upload stages uploaded attachments (SPEC §6): it admits an upload under the box's
// published limits (upload_concurrency_max uploads and upload_temp_max_bytes temporary bytes
// at once, counted by each server process), streams the file to a temporary file in a
// directory of its own while computing its SHA-256, stops at attachment_max_bytes (or at
// upload_temp_max_bytes when that is smaller: no file larger than the box's whole temporary
// space is ever staged), and removes the file when the request ends — stored, rejected,
// cancelled or failed alike. Temporary files a crashed process left behind are removed when
// the next process starts. The bytes become permanent only in PostgreSQL, in the send's own
// transaction.
//
// Refusals (SPEC §12): RATE_LIMITED (retryable) only when the upload would be admitted once
// the box's other uploads finish; an upload its box can never admit is LIMIT_EXCEEDED on the
// file part — uploads_disabled when upload_concurrency_max or channel_attachment_cap is 0
// (the message would be deleted by retention as it is stored), upload_too_large_for_box
// when the file alone is larger than upload_temp_max_bytes, attachment_too_large past
// attachment_max_bytes.
//
// A failure of the server's own staging storage (the temporary file cannot be created or
// written: a full disk, a directory removed or replaced) is no refusal of the upload: it is
// a *StagingError, answered TEMPORARILY_UNAVAILABLE upload_staging_failed (retryable),
// never as a body the client failed to send. A process directory removed while the process
// runs (a /tmp cleaner) is recreated by the next upload.
package upload

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/google/uuid"

	"github.com/agentbox/agentbox/internal/apierr"
)

// RetryAfterSeconds is the retry hint of an upload refused by admission.
const RetryAfterSeconds = 1

// Limits are a box's upload settings.
type Limits struct {
	MaxBytes       int64 // attachment_max_bytes
	TempMaxBytes   int64 // upload_temp_max_bytes
	ConcurrencyMax int64 // upload_concurrency_max
	// KeepsNoAttachments: channel_attachment_cap is 0, so no channel keeps a message with an
	// attachment (retention would delete it in the send that stored it).
	KeepsNoAttachments bool
	// SettingsRevision is the revision of the settings these limits come from, given with a
	// refusal (SPEC §11: compare it to detect new limits).
	SettingsRevision int64
}

// fileCap is the most one upload may stage: attachment_max_bytes, and never more than the
// box's whole temporary space (a larger file could never be admitted).
func (l Limits) fileCap() int64 { return max(0, min(l.MaxBytes, l.TempMaxBytes)) }

// Rejection reasons (the error's reason and the metrics label).
const (
	// RATE_LIMITED: the box's other uploads in flight hold the slots or the bytes.
	ReasonConcurrency = "upload_concurrency_exceeded"
	ReasonTempBytes   = "upload_temp_bytes_exceeded"
	// LIMIT_EXCEEDED: the upload can never be admitted as it is.
	ReasonTooLarge       = "attachment_too_large"     // past attachment_max_bytes
	ReasonTooLargeForBox = "upload_too_large_for_box" // past upload_temp_max_bytes, alone
	ReasonDisabled       = "uploads_disabled"         // upload_concurrency_max or channel_attachment_cap is 0
	ReasonInvalid        = "invalid_upload"
	ReasonAborted        = "upload_aborted" // metrics only: the client broke off or sent a broken body
	// TEMPORARILY_UNAVAILABLE: the server's staging storage failed (StagingError).
	ReasonStagingFailed = "upload_staging_failed"
)

// filePart is the multipart part a size or admission refusal names as its field.
const filePart = "file"

// Stager owns this process's staging directory and the admission counters.
type Stager struct {
	dir string // this process's own directory under the root

	lockMu sync.Mutex
	lock   *os.File // held while the process lives: marks dir as in use

	// wrapWrite, set by tests only, stands between Stage and the staged file's writes.
	wrapWrite func(io.Writer) io.Writer

	mu    sync.Mutex
	boxes map[uuid.UUID]*usage

	inProgress atomic.Int64
	tempBytes  atomic.Int64 // bytes written to staged files that still exist
	rejectedMu sync.Mutex
	rejected   map[string]uint64
}

type usage struct {
	uploads  int64
	reserved int64
}

// lockName marks a process directory; its flock is held for the life of the process.
const lockName = "lock"

// NewStager prepares root: every process directory whose lock no live process holds (a
// crash or kill left it) is removed with its files, then this process creates its own.
// Several processes may share root.
func NewStager(root string) (*Stager, error) {
	if err := os.MkdirAll(root, dirPerm); err != nil {
		return nil, fmt.Errorf("upload: staging directory: %w", err)
	}
	if err := removeAbandoned(root); err != nil {
		return nil, err
	}
	var suffix [8]byte
	rand.Read(suffix[:]) //nolint:errcheck // never fails
	dir := filepath.Join(root, fmt.Sprintf("p%d-%s", os.Getpid(), hex.EncodeToString(suffix[:])))
	if err := os.Mkdir(dir, dirPerm); err != nil {
		return nil, fmt.Errorf("upload: staging directory: %w", err)
	}
	lock, err := lockDir(dir)
	if err != nil {
		os.RemoveAll(dir) //nolint:errcheck
		return nil, fmt.Errorf("upload: staging lock: %w", err)
	}
	return &Stager{dir: dir, lock: lock, boxes: map[uuid.UUID]*usage{}, rejected: map[string]uint64{}}, nil
}

// dirPerm is the staging directories' mode, the root's and each process's alike.
const dirPerm = 0o700

// lockDir creates dir's lock file and takes its flock, marking dir as a live process's.
func lockDir(dir string) (*os.File, error) {
	lock, err := os.OpenFile(filepath.Join(dir, lockName), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		lock.Close()
		return nil, err
	}
	return lock, nil
}

// createTemp creates a staging file in the process's directory. A directory removed while
// the process runs (a /tmp cleaner, the root with it or not) is recreated as NewStager made
// it, lock included, so one cleaner run does not fail every upload until a restart.
func (s *Stager) createTemp() (*os.File, error) {
	f, err := os.CreateTemp(s.dir, "upload-*.part")
	if errors.Is(err, fs.ErrNotExist) {
		if err = s.recreateDir(); err == nil {
			f, err = os.CreateTemp(s.dir, "upload-*.part")
		}
	}
	if err != nil {
		return nil, &StagingError{Op: "create", Dir: s.dir, Err: err}
	}
	return f, nil
}

// recreateDir makes the process directory again and locks it anew (the lock held on the
// removed one marks nothing: a starting process would take the new directory, which has no
// lock file, for abandoned and remove it). Concurrent uploads recreate it once.
func (s *Stager) recreateDir() error {
	s.lockMu.Lock()
	defer s.lockMu.Unlock()
	if err := os.MkdirAll(s.dir, dirPerm); err != nil {
		return err
	}
	if held, err := s.lock.Stat(); err == nil {
		if onDisk, err := os.Stat(filepath.Join(s.dir, lockName)); err == nil && os.SameFile(held, onDisk) {
			return nil // another upload recreated it
		}
	}
	lock, err := lockDir(s.dir)
	if err != nil {
		return err
	}
	s.lock.Close()
	s.lock = lock
	return nil
}

// StagingError is a failure of the server's staging storage while an upload is staged —
// creating or writing its temporary file — as opposed to reading the client's body, which
// Stage returns as it is. Nothing is kept: the file is already removed.
type StagingError struct {
	Op  string // "create" or "write"
	Dir string // the process's staging directory
	Err error  // the *os.PathError / syscall.Errno
}

func (e *StagingError) Error() string {
	return "upload: staging file " + e.Op + " in " + e.Dir + ": " + e.Err.Error()
}

func (e *StagingError) Unwrap() error { return e.Err }

// Errno is the system error behind the failure (0 when there is none).
func (e *StagingError) Errno() syscall.Errno {
	var errno syscall.Errno
	errors.As(e.Err, &errno)
	return errno
}

// StagingFailed is the answer to an upload the server could not stage: the server's own
// failure, not the caller's, and one a retry may pass (space freed, the directory
// recreated, another server process).
func StagingFailed() *apierr.Error {
	return apierr.New(apierr.TemporarilyUnavailable, "the server could not stage the upload in its temporary storage; nothing was stored").
		WithReason(ReasonStagingFailed).
		WithSuggestion("retry shortly with the same idempotency_key")
}

// removeAbandoned removes the process directories under root whose lock is free.
func removeAbandoned(root string) error {
	entries, err := os.ReadDir(root)
	if err != nil {
		return fmt.Errorf("upload: staging directory: %w", err)
	}
	for _, e := range entries {
		path := filepath.Join(root, e.Name())
		if !e.IsDir() {
			continue
		}
		f, err := os.OpenFile(filepath.Join(path, lockName), os.O_RDWR, 0)
		if err == nil {
			err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
			if err != nil { // a live process holds it
				f.Close()
				continue
			}
		}
		// No lock file (the process died while creating it) or a free lock: abandoned.
		rmErr := os.RemoveAll(path)
		if f != nil {
			f.Close()
		}
		if rmErr != nil {
			return fmt.Errorf("upload: removing abandoned staging files: %w", rmErr)
		}
	}
	return nil
}

// Dir is this process's staging directory (tests assert it is empty).
func (s *Stager) Dir() string { return s.dir }

// Close removes this process's staging directory.
func (s *Stager) Close() error {
	err := os.RemoveAll(s.dir)
	s.lockMu.Lock()
	s.lock.Close()
	s.lockMu.Unlock()
	return err
}

// Slot is one admitted upload; Release ends it.
type Slot struct {
	s        *Stager
	box      uuid.UUID
	reserved int64
	limits   Limits // the limits it was admitted under; Stage enforces them
	file     *File
	released bool
}

// Admit admits one upload for the box if it stays within the box's limits, reserving the
// most it may stage: its declared request size (declared, -1 when unknown), never more than
// the most one file may be (fileCap). Nothing is staged when it is refused.
//
// An upload the box can never admit (upload_concurrency_max 0) or never keep
// (channel_attachment_cap 0) is LIMIT_EXCEEDED uploads_disabled. Since a reservation never exceeds upload_temp_max_bytes and the
// concurrency cap is at least 1 past that check, the RATE_LIMITED refusals below happen only
// while other uploads of the box are in flight: they clear when those finish.
func (s *Stager) Admit(box uuid.UUID, lim Limits, declared int64) (*Slot, error) {
	if lim.ConcurrencyMax < 1 {
		s.Reject(ReasonDisabled)
		return nil, apierr.New(apierr.LimitExceeded, "this box accepts no uploads: its upload_concurrency_max is 0").
			WithField(filePart).WithReason(ReasonDisabled).WithLimit(0).WithSettingsRevision(lim.SettingsRevision).
			WithSuggestion("send without the file, or ask an admin to raise upload_concurrency_max")
	}
	if lim.KeepsNoAttachments {
		s.Reject(ReasonDisabled)
		return nil, apierr.New(apierr.LimitExceeded, "this box keeps no messages with attachments: its channel_attachment_cap is 0").
			WithField(filePart).WithReason(ReasonDisabled).WithLimit(0).WithSettingsRevision(lim.SettingsRevision).
			WithSuggestion("send without the file, or ask an admin to raise channel_attachment_cap")
	}
	reserve := lim.fileCap()
	if declared >= 0 && declared < reserve {
		reserve = declared
	}
	s.mu.Lock()
	u := s.boxes[box]
	if u == nil {
		u = &usage{}
		s.boxes[box] = u
	}
	var reason string
	switch {
	case u.uploads+1 > lim.ConcurrencyMax:
		reason = ReasonConcurrency
	case reserve > lim.TempMaxBytes-u.reserved: // as reserved+reserve > max, without overflowing at the int64 top
		reason = ReasonTempBytes
	default:
		u.uploads++
		u.reserved += reserve
	}
	if u.uploads == 0 {
		delete(s.boxes, box)
	}
	s.mu.Unlock()
	if reason != "" {
		s.Reject(reason)
		what := "other uploads of this box are in progress (upload_concurrency_max)"
		if reason == ReasonTempBytes {
			what = "other uploads of this box hold its temporary space (upload_temp_max_bytes)"
		}
		return nil, apierr.New(apierr.RateLimited, what+"; retry shortly").
			WithReason(reason).WithRetryAfter(RetryAfterSeconds)
	}
	s.inProgress.Add(1)
	return &Slot{s: s, box: box, reserved: reserve, limits: lim}, nil
}

// Reject counts a refused or abandoned upload by reason (Admit counts its own refusals).
func (s *Stager) Reject(reason string) {
	s.rejectedMu.Lock()
	s.rejected[reason]++
	s.rejectedMu.Unlock()
}

// Release removes the staged file (if any) and gives the slot's reservation back. Safe to
// call more than once.
func (sl *Slot) Release() {
	if sl.released {
		return
	}
	sl.released = true
	if f := sl.file; f != nil {
		f.remove()
	}
	s := sl.s
	s.mu.Lock()
	u := s.boxes[sl.box]
	u.uploads--
	u.reserved -= sl.reserved
	if u.uploads == 0 {
		delete(s.boxes, sl.box)
	}
	s.mu.Unlock()
	s.inProgress.Add(-1)
}

// File is a staged upload: its metadata and a temporary file removed by Slot.Release.
type File struct {
	Name      string
	MediaType string
	SizeBytes int64
	SHA256    string // lowercase hex

	s    *Stager
	f    *os.File
	path string
}

// Stage streams r into a new temporary file, hashing it, and stops with LIMIT_EXCEEDED past
// the slot's file cap: attachment_too_large past attachment_max_bytes, or
// upload_too_large_for_box past upload_temp_max_bytes when that is the smaller limit (the
// file alone could never fit the box's temporary space). The byte that shows a file is too
// large is never written, so the staged bytes stay within the reservation. A failure to
// create or write the file is a *StagingError; an error reading r is returned as it is. On
// any failure the file is already removed.
func (sl *Slot) Stage(r io.Reader, name, mediaType string) (*File, error) {
	if sl.file != nil {
		return nil, errors.New("upload: a slot stages one file")
	}
	f, err := sl.s.createTemp()
	if err != nil {
		return nil, err
	}
	sf := &File{Name: name, MediaType: mediaType, s: sl.s, f: f, path: f.Name()}
	sl.file = sf
	h := sha256.New()
	// Within the reservation too: a declared request (the reservation when smaller) never
	// carries a file larger than itself.
	limit := sl.limits.fileCap()
	var dst io.Writer = f
	if sl.s.wrapWrite != nil {
		dst = sl.s.wrapWrite(f)
	}
	w := &countingWriter{f: dst, h: h, s: sl.s, limit: limit}
	read := limit + 1 // the byte past the cap shows a file too large
	if limit == math.MaxInt64 {
		read = limit // settings at the int64 top: no byte could be past it (limit+1 wrapped, and no byte was read)
	}
	_, err = io.CopyBuffer(w, io.LimitReader(r, read), make([]byte, 32<<10))
	sf.SizeBytes = w.n
	if errors.Is(err, errOverCap) {
		sf.remove()
		return nil, sl.tooLarge()
	}
	if err != nil {
		sf.remove()
		return nil, err
	}
	sf.SHA256 = hex.EncodeToString(h.Sum(nil))
	return sf, nil
}

// tooLarge is the refusal of a file past the slot's cap, naming the limit it broke.
func (sl *Slot) tooLarge() error {
	lim := sl.limits
	if lim.MaxBytes <= lim.TempMaxBytes {
		return apierr.TooLarge(filePart, ReasonTooLarge, lim.MaxBytes).WithSettingsRevision(lim.SettingsRevision)
	}
	return apierr.New(apierr.LimitExceeded, "the file is larger than upload_temp_max_bytes, all the temporary space this box's uploads may use at once, so this box can never admit it").
		WithField(filePart).WithReason(ReasonTooLargeForBox).WithLimit(lim.TempMaxBytes).WithSettingsRevision(lim.SettingsRevision).
		WithSuggestion("send a smaller file, or ask an admin to raise upload_temp_max_bytes")
}

// Reader reads the staged bytes from the start.
func (f *File) Reader() (io.Reader, error) {
	if _, err := f.f.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}
	return io.LimitReader(f.f, f.SizeBytes), nil
}

func (f *File) remove() {
	if f.f == nil {
		return
	}
	f.f.Close()
	os.Remove(f.path) //nolint:errcheck // the directory is swept at the next start anyway
	f.f = nil
	f.s.tempBytes.Add(-f.SizeBytes)
}

// errOverCap stops a copy at the first byte past the writer's limit (that byte unwritten).
var errOverCap = errors.New("upload: over the file cap")

type countingWriter struct {
	f     io.Writer // the staged file
	h     hash.Hash
	s     *Stager
	n     int64
	limit int64
}

func (w *countingWriter) Write(p []byte) (int, error) {
	over := int64(len(p)) > w.limit-w.n
	if over {
		p = p[:w.limit-w.n]
	}
	n, err := w.f.Write(p)
	w.h.Write(p[:n])
	w.n += int64(n)
	w.s.tempBytes.Add(int64(n))
	switch {
	case err != nil: // the server's storage, not the client's body (a full disk: ENOSPC)
		err = &StagingError{Op: "write", Dir: w.s.dir, Err: err}
	case over:
		err = errOverCap
	}
	return n, err
}

// WriteMetrics renders the staging gauges and the rejection counter (Prometheus text).
func (s *Stager) WriteMetrics(w io.Writer) {
	fmt.Fprintln(w, "# HELP agentbox_uploads_in_progress Uploads admitted and not yet finished.")
	fmt.Fprintln(w, "# TYPE agentbox_uploads_in_progress gauge")
	fmt.Fprintf(w, "agentbox_uploads_in_progress %d\n", s.inProgress.Load())
	fmt.Fprintln(w, "# HELP agentbox_upload_temp_bytes Bytes held in temporary upload files.")
	fmt.Fprintln(w, "# TYPE agentbox_upload_temp_bytes gauge")
	fmt.Fprintf(w, "agentbox_upload_temp_bytes %d\n", s.tempBytes.Load())
	s.rejectedMu.Lock()
	reasons := make([]string, 0, len(s.rejected))
	for r := range s.rejected {
		reasons = append(reasons, r)
	}
	sort.Strings(reasons)
	fmt.Fprintln(w, "# HELP agentbox_uploads_rejected_total Uploads refused or abandoned, by reason.")
	fmt.Fprintln(w, "# TYPE agentbox_uploads_rejected_total counter")
	for _, r := range reasons {
		fmt.Fprintf(w, "agentbox_uploads_rejected_total{reason=%q} %d\n", r, s.rejected[r])
	}
	s.rejectedMu.Unlock()
}

// ValidName reports whether a client file name is storable: 1..255 bytes of valid text with
// no path separators, control characters or bidirectional formatting characters (the server
// never interprets it as a path; U+202E and its kin would make "txt.exe" display as
// "exe.txt" wherever the name is shown).
func ValidName(name string) bool {
	if strings.TrimSpace(name) == "" || len(name) > 255 || name == "." || name == ".." || strings.ContainsAny(name, "/\\") {
		return false
	}
	for _, r := range name {
		switch {
		case r < 0x20 || r == 0x7f || r == 0xfffd:
			return false
		case r == 0x200e || r == 0x200f || (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069):
			return false
		}
	}
	return true
}

// BaseName is a multipart filename without the directory part a client may send (RFC 7578
// §4.2: do not use it), up to the last / or \ (Windows clients send C:\dir\name).
func BaseName(filename string) string {
	if i := strings.LastIndexAny(filename, "/\\"); i >= 0 {
		return filename[i+1:]
	}
	return filename
}

type ctxKey struct{}

// WithFile attaches a staged upload to a request's context: the transport's evidence that
// this HTTP request carried one (MCP never sets it, so tools never carry bytes).
func WithFile(ctx context.Context, f *File) context.Context {
	return context.WithValue(ctx, ctxKey{}, f)
}

// FileFrom returns the request's staged upload, nil when it has none.
func FileFrom(ctx context.Context) *File {
	f, _ := ctx.Value(ctxKey{}).(*File)
	return f
}
