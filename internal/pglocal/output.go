package pglocal

import (
	"fmt"
	"io"
	"strings"
	"sync"
)

// tailBytes bounds how much recent output is kept for error messages.
const tailBytes = 4 << 10

// outputSink receives the output of initdb and the running server.
// It forwards to Options.Log and keeps the last few KB so a failure can say
// why (the log is otherwise discarded when Options.Log is nil).
//
// Write never fails: the server writes its log into a pipe we drain, and a
// failing Log writer must not make us stop draining (the server would block).
// The first forwarding error is kept and reported by Err instead.
type outputSink struct {
	mu     sync.Mutex
	dst    io.Writer // nil = discard
	dstErr error
	tail   []byte
}

func newOutputSink(dst io.Writer) *outputSink { return &outputSink{dst: dst} }

func (s *outputSink) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tail = append(s.tail, p...)
	if over := len(s.tail) - tailBytes; over > 0 {
		s.tail = append(s.tail[:0], s.tail[over:]...)
	}
	if s.dst != nil && s.dstErr == nil {
		if _, err := s.dst.Write(p); err != nil {
			s.dstErr = fmt.Errorf("pglocal: writing to Options.Log: %w", err)
		}
	}
	return len(p), nil
}

// Err reports the first error from Options.Log, if any.
func (s *outputSink) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dstErr
}

// Tail returns recent output, indented for inclusion in an error message.
func (s *outputSink) Tail() string {
	s.mu.Lock()
	text := strings.TrimSpace(string(s.tail))
	s.mu.Unlock()
	if text == "" {
		return ""
	}
	return "\n--- recent PostgreSQL output ---\n" + text
}
