package mcpserver

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"

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
// closes or ctx ends, forwarding every call to the HTTP API.
func RunStdio(ctx context.Context, cfg StdioConfig, in io.ReadCloser, out io.WriteCloser) error {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	f, err := NewForwarder(cfg.Server, cfg.Credentials, cfg.Session, nil)
	if err != nil {
		return err
	}
	s := New(f, Options{Router: routerKeys(ctx, f, cfg.Credentials, cfg.Box, cfg.Log), Version: cfg.Version, Log: cfg.Log})
	return s.Run(ctx, fixedErrorTransport{&mcp.IOTransport{Reader: in, Writer: out}})
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
