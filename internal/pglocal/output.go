package pglocal

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
)

// tailBytes bounds how much recent output is kept for error messages.
const tailBytes = 4 << 10

// outputSink receives the output of initdb, pg_ctl and the running server.
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

// serverPipe carries the output of pg_ctl start and of the postmaster it
// launches. A plain io.Writer cannot be used as the command's stdout: exec
// would wait for the pipe to close, i.e. for the server to exit. Handing the
// child a real file descriptor and draining it ourselves avoids that.
type serverPipe struct {
	w    *os.File      // given to pg_ctl; closed by us once pg_ctl returns
	done chan struct{} // closed when the server side has closed the pipe
}

func startServerPipe(sink *outputSink) (*serverPipe, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("pglocal: server log pipe: %w", err)
	}
	p := &serverPipe{w: w, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		defer r.Close()
		if _, err := io.Copy(sink, r); err != nil {
			fmt.Fprintf(sink, "pglocal: reading server log: %v\n", err)
		}
	}()
	return p, nil
}
