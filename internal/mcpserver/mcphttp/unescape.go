package mcphttp

import (
	"bytes"
	"net/http"

	"github.com/agentbox/agentbox/internal/mcpserver"
)

// htmlUnescaper writes every /mcp answer with <, > and & as themselves rather than the
// six-byte escapes encoding/json writes (mcpserver.UnescapeHTML says why): the same JSON,
// up to twelve times smaller for a body made of them.
type htmlUnescaper struct {
	http.ResponseWriter
	held []byte // an escape cut off at the end of the last Write
	out  []byte
}

func (u *htmlUnescaper) Write(p []byte) (int, error) {
	if len(u.held) == 0 && bytes.IndexByte(p, '\\') < 0 {
		return u.ResponseWriter.Write(p) // no escape at all: nothing to rewrite
	}
	in := p
	if len(u.held) > 0 {
		in = append(u.held, p...)
	}
	var held []byte
	u.out, held = mcpserver.UnescapeHTML(u.out[:0], in, false)
	u.held = append([]byte(nil), held...)
	if len(u.out) > 0 {
		if _, err := u.ResponseWriter.Write(u.out); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

// flushHeld writes an escape still held (never part of a complete JSON text, so as it is).
func (u *htmlUnescaper) flushHeld() {
	if len(u.held) > 0 {
		u.ResponseWriter.Write(u.held) //nolint:errcheck // the client went away
		u.held = nil
	}
}

func (u *htmlUnescaper) Flush() {
	u.flushHeld()
	if f, ok := u.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (u *htmlUnescaper) Unwrap() http.ResponseWriter { return u.ResponseWriter }
