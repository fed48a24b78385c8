package cli

import (
	"context"
	"flag"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/agentbox/agentbox/internal/mcpserver"
	"github.com/agentbox/agentbox/internal/version"
)

// mcpStdio runs `agentbox mcp`: the tool list over stdio, every call forwarded to the HTTP
// API at AGENTBOX_SERVER with AGENTBOX_API_KEY or the AGENTBOX_CREDENTIALS entry of the
// call's box_key. It never opens the database. Every call carries one Agentbox-Session
// (SPEC §3): AGENTBOX_SESSION when set, so one-shot clients that start a process per call
// keep one session; otherwise one generated at start, a session per process.
const mcpUsage = `usage: agentbox mcp

Serves the agent tools over MCP stdio (JSON-RPC on stdin and stdout; logs on stderr), forwarding
each call to the Agentbox server. Configured by its environment, no flags:

  AGENTBOX_SERVER       the server's URL (default http://127.0.0.1:8080)
  AGENTBOX_API_KEY      the agent's key
  AGENTBOX_CREDENTIALS  instead of the key: a JSON file mapping box_key to key
  AGENTBOX_BOX          optional, the key's box: lets the process ask whether the key is a
                        router key (which sees tool_search, tool_describe, tool_execute)
  AGENTBOX_SESSION      optional, the session name; processes started with the same one
                        share a session (default: a new session per process)

A client's configuration for it: docs/mcp-clients.md.
`

func (e *env) mcpStdio(args []string) error {
	fs := flag.NewFlagSet("agentbox mcp", flag.ContinueOnError)
	if err := parseArgs(fs, args, mcpUsage, nil, nil); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("unexpected argument: agentbox mcp takes no arguments; it is configured by its environment (agentbox mcp --help)")
	}
	creds, err := mcpserver.CredentialsFromEnv(os.Getenv)
	if err != nil {
		return usageError{err.Error()}
	}
	server, _, err := serverBase() // a URL that is none is refused as the other commands refuse it
	if err != nil {
		return err
	}
	session, err := mcpserver.SessionFromEnv(os.Getenv)
	if err != nil {
		return usageError{err.Error()}
	}
	box, err := mcpserver.BoxFromEnv(os.Getenv)
	if err != nil {
		return usageError{err.Error()}
	}
	if session == "" {
		session = mcpserver.NewSessionKey("stdio-")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return mcpserver.RunStdio(ctx, mcpserver.StdioConfig{
		Server:      server,
		Credentials: creds,
		Session:     session,
		Version:     version.String(),
		Box:         box,
		Log:         slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	}, io.NopCloser(e.stdin), nopWriteCloser{e.stdout})
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
