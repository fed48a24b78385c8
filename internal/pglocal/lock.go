package pglocal

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// lockFile in DataDir is held (flock, exclusive) by the process owning the cluster for its
// whole life. The kernel releases it however that process ends, so a held lock always means
// a live owner, and a cluster found running without one was left by an owner that died.
const lockFile = "owner.lock"

// InUseError: another live process owns the data directory; nothing of it was touched.
type InUseError struct {
	DataDir string
	PID     int // 0 when the holder has not written its PID yet
}

func (e *InUseError) Error() string {
	if e.PID == 0 {
		return fmt.Sprintf("pglocal: data directory %s is in use by another running agentbox process", e.DataDir)
	}
	return fmt.Sprintf("pglocal: data directory %s is in use by another running agentbox process (PID %d)", e.DataDir, e.PID)
}

// dirLock is the held lock; closing the file releases it.
type dirLock struct{ f *os.File }

// lockDataDir takes the exclusive lock without waiting and records our PID in the file.
func lockDataDir(dataDir string) (*dirLock, error) {
	path := filepath.Join(dataDir, lockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("pglocal: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, &InUseError{DataDir: dataDir, PID: holderPID(path)}
		}
		return nil, fmt.Errorf("pglocal: locking %s: %w", path, err)
	}
	if err := f.Truncate(0); err != nil {
		f.Close()
		return nil, fmt.Errorf("pglocal: %w", err)
	}
	if _, err := f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0); err != nil {
		f.Close()
		return nil, fmt.Errorf("pglocal: %w", err)
	}
	return &dirLock{f: f}, nil
}

func holderPID(path string) int {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(data)))
	return pid
}

func (l *dirLock) release() {
	if l != nil {
		l.f.Close()
	}
}
