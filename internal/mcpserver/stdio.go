package mcpserver

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
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
	s := New(f, Options{Router: routerKeys(ctx, f, cfg.Credentials, cfg.Box, cfg.Log), Version: cfg.Version, Log: cfg.Log})
	return s.Run(ctx, fixedErrorTransport{drainTransport{&mcp.IOTransport{Reader: in, Writer: out}, cfg.Log}})
}

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

// routerKeys reports whether this process serves router mode: the server says each key of a
// credentials file (or the single key, for AGENTBOX_BOX) is a router key (GET /me). A single
// key without a box cannot be asked and serves the full list; so does a server that cannot
// be reached at start. Authorization is the server's either way: the mode shapes tools/list.
func routerKeys(ctx context.Context, f *Forwarder, creds Credentials, box string, log *slog.Logger) bool {
	boxes := creds.Boxes()
	if len(boxes) == 0 && box != "" {
		boxes = []string{box}
	}
	if len(boxes) == 0 {
		return false
	}
	for _, box := range boxes {
		body, err := f.Me(ctx, box)
		if err != nil {
			log.WarnContext(ctx, "cannot learn the key's mode; serving the full tool list", slog.String("box_key", box), slog.Any("err", err))
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
