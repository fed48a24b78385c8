package mcpserver

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbox/agentbox/internal/apierr"
)

// StdioConfig configures `agentbox mcp`.
type StdioConfig struct {
	Server      string // AGENTBOX_SERVER
	Credentials Credentials
	Session     string // the Agentbox-Session this process sends on every call
	Box         string // AGENTBOX_BOX: with a single key, the box whose /me tells the key's mode
	Version     string
	Log         *slog.Logger
}

// RunStdio serves the tool list over stdio (newline-delimited JSON-RPC on in/out) until in
// closes or ctx ends, forwarding every call to the HTTP API. Every request read before in
// closes is answered before RunStdio returns (see drainConn).
func RunStdio(ctx context.Context, cfg StdioConfig, in io.ReadCloser, out io.WriteCloser) error {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	f, err := NewForwarder(cfg.Server, cfg.Credentials, cfg.Session, nil)
	if err != nil {
		return err
	}
	checked, err := checkServer(ctx, f, cfg)
	if err != nil {
		return err
	}
	s := New(f, Options{Router: routerKeys(ctx, f, cfg, checked), Version: cfg.Version, Log: cfg.Log})
	w := &lockedWriter{w: out}
	lines := &messageLines{in: bufio.NewReaderSize(in, 64<<10), src: in, out: w}
	return s.Run(ctx, fixedErrorTransport{drainTransport{&mcp.IOTransport{Reader: lines, Writer: w, MaxLineLength: maxStdioLine}, cfg.Log}})
}

// maxStdioLine bounds one message line, as the SDK's own reader bounds a frame.
const maxStdioLine = mcp.DefaultMaxLineLength

// messageLines hands the SDK only lines that are JSON-RPC messages (or batches of them) and
// answers any other line itself: -32700 for a line that is not JSON, -32600 for JSON that is
// not a message (an id that is an object, a method that is not a string…), with a null id
// (JSON-RPC 2.0 §5.1: the id could not be read). The SDK's reader treats such a line as the
// end of the connection, so one bad line used to end the process and lose every request
// after it. Stdio messages are newline-delimited and contain no newline (MCP, stdio
// transport), so a line is a message.
type messageLines struct {
	in      *bufio.Reader
	src     io.Closer
	out     *lockedWriter
	pending []byte
	err     error
}

func (l *messageLines) Read(p []byte) (int, error) {
	for len(l.pending) == 0 {
		if l.err != nil {
			return 0, l.err
		}
		line, tooLong, err := l.readLine()
		l.err = err
		if tooLong { // the SDK refuses such a frame too; here it costs the line, not the process
			l.out.Write(protocolErrorLine(jsonrpc.CodeParseError)) //nolint:errcheck // a broken stdout ends the process anyway
			continue
		}
		msg := LimitNesting(bytes.TrimSpace(line))
		if len(msg) == 0 {
			continue
		}
		if code := lineError(msg); code != 0 {
			l.out.Write(protocolErrorLine(code)) //nolint:errcheck // a broken stdout ends the process anyway
			continue
		}
		l.pending = append(msg, '\n')
	}
	n := copy(p, l.pending)
	l.pending = l.pending[n:]
	return n, nil
}

// readLine reads up to and including the next newline, keeping at most maxStdioLine bytes:
// the rest of a longer line is read and dropped (tooLong).
func (l *messageLines) readLine() (line []byte, tooLong bool, err error) {
	for {
		chunk, err := l.in.ReadSlice('\n')
		if !tooLong && len(line)+len(chunk) <= maxStdioLine {
			line = append(line, chunk...)
		} else {
			tooLong, line = true, nil
		}
		if err != bufio.ErrBufferFull {
			return line, tooLong, err
		}
	}
}

func (l *messageLines) Close() error { return l.src.Close() }

// lineError is the JSON-RPC error code a line earns before the SDK sees it (0: none).
func lineError(msg []byte) int64 {
	if !json.Valid(msg) {
		return jsonrpc.CodeParseError
	}
	if msg[0] != '[' {
		if _, err := jsonrpc.DecodeMessage(msg); err != nil {
			return jsonrpc.CodeInvalidRequest
		}
		return 0
	}
	var batch []json.RawMessage
	if json.Unmarshal(msg, &batch) != nil || len(batch) == 0 {
		return jsonrpc.CodeInvalidRequest
	}
	for _, m := range batch {
		if _, err := jsonrpc.DecodeMessage(m); err != nil {
			return jsonrpc.CodeInvalidRequest
		}
	}
	return 0
}

func protocolErrorLine(code int64) []byte {
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": nil, "error": map[string]any{"code": code, "message": ProtocolErrorMessage(code)}})
	return append(b, '\n')
}

// lockedWriter is stdout, shared by the SDK (one Write per message) and messageLines.
// lockedWriter writes one whole message line at a time (the SDK's transport and
// messageLines both write a line per call), with <, > and & as themselves (UnescapeHTML).
type lockedWriter struct {
	mu  sync.Mutex
	w   io.WriteCloser
	out []byte
}

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.out, _ = UnescapeHTML(w.out[:0], p, true)
	if _, err := w.w.Write(w.out); err != nil {
		return 0, err
	}
	return len(p), nil
}

func (w *lockedWriter) Close() error { return w.w.Close() }

// drainBound is how long the end of input waits for the answers still owed: a forwarded
// call ends within the Forwarder's HTTP timeout (callTimeout) and calls run concurrently,
// so every call in flight at EOF has answered by then unless it is stuck; the margin
// covers encoding and writing the answer. Longer would only keep a stuck process alive.
const drainBound = callTimeout + 5*time.Second

// drainTransport holds back the end of input until every request read so far is answered.
//
// The SDK (go-sdk v1.8.0, internal/jsonrpc2/conn.go) treats a read error, EOF included, as
// the connection shutting down: readIncoming cancels every incoming call in flight, and
// Connection.write refuses every message once readErr is set. A client that writes its
// requests and closes stdin at once (printf … | agentbox mcp) so lost the answers not yet
// written, often all of them, and the process still exited 0. The real fix is upstream:
// EOF as a read half-close that lets accepted calls finish and answer
// (modelcontextprotocol/go-sdk issue #1061, PR #1067); drop this wrapper once it lands.
type drainTransport struct {
	mcp.Transport
	log *slog.Logger
}

func (t drainTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &drainConn{Connection: c, ctx: ctx, log: t.log, pending: map[jsonrpc.ID]bool{},
		answered: make(chan struct{}, 1), closed: make(chan struct{})}, nil
}

// drainConn returns a read error only once every call it has read has been answered (a
// response with its ID written), drainBound has passed, ctx has ended or the connection
// is closed.
type drainConn struct {
	mcp.Connection
	ctx      context.Context // RunStdio's: a signal ends the wait
	log      *slog.Logger
	mu       sync.Mutex
	pending  map[jsonrpc.ID]bool // calls read and not yet answered
	answered chan struct{}       // a pending call was answered
	close    sync.Once
	closed   chan struct{}
}

func (c *drainConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Connection.Read(ctx)
	if err != nil {
		c.drain(ctx)
		return nil, err
	}
	if r, ok := msg.(*jsonrpc.Request); ok && r.IsCall() {
		c.mu.Lock()
		c.pending[r.ID] = true // before the SDK sees the call, so before its answer
		c.mu.Unlock()
	}
	return msg, nil
}

// Write marks a call answered once its response is written (or failed to be: it will not
// be retried), so the end of input never precedes the bytes of an answer.
func (c *drainConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	err := c.Connection.Write(ctx, msg)
	if r, ok := msg.(*jsonrpc.Response); ok {
		c.mu.Lock()
		delete(c.pending, r.ID)
		c.mu.Unlock()
		select {
		case c.answered <- struct{}{}:
		default:
		}
	}
	return err
}

func (c *drainConn) Close() error {
	c.close.Do(func() { close(c.closed) })
	return c.Connection.Close()
}

// drain waits until no call read is unanswered, within drainBound.
func (c *drainConn) drain(ctx context.Context) {
	timeout := time.NewTimer(drainBound)
	defer timeout.Stop()
	for {
		c.mu.Lock()
		n := len(c.pending)
		c.mu.Unlock()
		if n == 0 {
			return
		}
		select {
		case <-c.answered:
		case <-timeout.C:
			c.log.WarnContext(ctx, "input ended; calls still unanswered are abandoned", slog.Int("calls", n), slog.Duration("waited", drainBound))
			return
		case <-c.closed:
			return
		case <-c.ctx.Done():
			return
		case <-ctx.Done():
			return
		}
	}
}

// checkServer refuses to start when AGENTBOX_SERVER answers as something other than
// Agentbox: every call would fail, and a model told TEMPORARILY_UNAVAILABLE would retry for
// ever, so the mistake is reported once, at start, where the MCP client shows it. A server
// that does not answer yet is only logged: it may start later, and until it does every call
// is TEMPORARILY_UNAVAILABLE, retryable.
//
// It asks as the key of the box the process knows (checkedBox), so a good key costs the
// server no failed authentication (an auth-failure alert would otherwise fire at every
// process start) and the answer is the key's identity, which routerKeys reuses. A key the
// server refuses is logged, naming the box: the process still starts (other boxes of a
// credentials file may be fine, and a disabled agent may be enabled again), and each call
// for that box answers AUTH_FAILED, which is not retryable.
func checkServer(ctx context.Context, f *Forwarder, cfg StdioConfig) (meAnswer, error) {
	ctx, cancel := context.WithTimeout(ctx, serverCheckTimeout)
	defer cancel()
	checked := meAnswer{box: checkedBox(cfg)}
	checked.body, checked.err = f.CheckServer(ctx, checked.box)
	var refused *apierr.Error
	switch err := checked.err; {
	case errors.Is(err, ErrNotAgentbox):
		return meAnswer{}, err
	case errors.As(err, &refused) && refused.Code == apierr.AuthFailed:
		cfg.Log.WarnContext(ctx, "the agentbox server refuses this process's key for the box: every call for it answers AUTH_FAILED "+
			"(a wrong, revoked or disabled key or agent, or a source IP not registered for the agent's host); check "+keySource(cfg.Credentials),
			slog.String("server", cfg.Server), slog.String("box_key", checked.box))
	case errors.As(err, &refused):
		// The server answered as Agentbox (its database may be down): calls tell the caller.
	case err != nil:
		cfg.Log.WarnContext(ctx, "the agentbox server does not answer yet; calls report TEMPORARILY_UNAVAILABLE until it does",
			slog.String("server", cfg.Server))
	}
	if cfg.Box == "" && len(cfg.Credentials.Boxes()) == 0 {
		cfg.Log.WarnContext(ctx, "AGENTBOX_BOX is not set: the key's mode cannot be asked, so the full tool list is served "+
			"(a router key's list needs AGENTBOX_BOX or AGENTBOX_CREDENTIALS), and the server was checked without a key, "+
			"which it logs as a failed authentication")
	}
	return checked, nil
}

// meAnswer is the start check's GET /me: for box (as its key; "" when asked without a key),
// the identity or the refusal.
type meAnswer struct {
	box  string
	body json.RawMessage
	err  error
}

// checkedBox is the box the start check asks about as its key: AGENTBOX_BOX when the process
// holds its key, else the first box of a credentials file; "" (asked without a key) only for
// a single key without AGENTBOX_BOX, whose box is unknown.
func checkedBox(cfg StdioConfig) string {
	if cfg.Box != "" {
		if _, ok := cfg.Credentials.Key(cfg.Box); ok {
			return cfg.Box
		}
	}
	if boxes := cfg.Credentials.Boxes(); len(boxes) > 0 {
		return boxes[0]
	}
	return ""
}

// keySource names where the process's keys come from, never a key.
func keySource(c Credentials) string {
	if c.byBox != nil {
		return "that box's key in AGENTBOX_CREDENTIALS"
	}
	return "AGENTBOX_API_KEY and AGENTBOX_BOX"
}

// serverCheckTimeout bounds checkServer.
const serverCheckTimeout = 5 * time.Second

// routerKeys reports whether this process serves router mode: the server says each key of a
// credentials file (or the single key, for AGENTBOX_BOX) is a router key (GET /me; the start
// check's answer for the box it checked). A single key without a box cannot be asked and
// serves the full list; so does a server that cannot be reached at start. Authorization is
// the server's either way: the mode shapes tools/list.
func routerKeys(ctx context.Context, f *Forwarder, cfg StdioConfig, checked meAnswer) bool {
	boxes := cfg.Credentials.Boxes()
	if len(boxes) == 0 && cfg.Box != "" {
		boxes = []string{cfg.Box}
	}
	if len(boxes) == 0 {
		return false
	}
	// The checked box first: its answer is known, and a key that is not a router key ends the loop.
	if i := slices.Index(boxes, checked.box); i > 0 {
		boxes = append([]string{checked.box}, slices.Delete(boxes, i, i+1)...)
	}
	for _, box := range boxes {
		body, err := checked.body, checked.err
		if box != checked.box {
			body, err = f.Me(ctx, box)
		} else if _, answered := apierr.As(err); err != nil && !answered {
			err = f.unreachable() // as Me says it
		}
		if err != nil {
			if e, ok := apierr.As(err); box != checked.box || !ok || e.Code != apierr.AuthFailed { // a refused key is said once
				cfg.Log.WarnContext(ctx, "cannot learn the key's mode; serving the full tool list", slog.String("box_key", box), slog.Any("err", err))
			}
			return false
		}
		var me struct {
			Router bool `json:"router"`
		}
		if json.Unmarshal(body, &me) != nil || !me.Router {
			return false
		}
	}
	return true
}
