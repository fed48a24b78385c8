package mcpserver

import (
	"context"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Calls is the tools/call surface of one server built by Build: the very handlers the SDK
// runs for a tools/call, for a transport that answers the common tools/call itself (package
// mcphttp; see its fastpath.go for why). Every other method, and any tools/call it does not
// answer, goes to the SDK server.
type Calls struct {
	sf      *surface
	entries map[string]*entry // served name or alias → its tool
	impl    *mcp.Implementation
}

// Implementation is the server's name and version, as the SDK server states them (in the
// 2026-07-28 protocol, in every result's _meta).
func (c *Calls) Implementation() *mcp.Implementation { return c.impl }

// Served reports whether tools/call of name (canonical or alias) reaches a tool in this
// server's mode; a name not served is the SDK's to refuse.
func (c *Calls) Served(name string) bool {
	_, ok := c.entries[name]
	return ok
}

// Call runs req as the SDK would after its receiving middleware: the alias renamed to its
// canonical tool, then the tool's handler (argument checks, Backend call, result shape).
// The returned result is what the SDK would marshal; Content is never nil. It panics if
// the name is not Served.
func (c *Calls) Call(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	e := c.entries[req.Params.Name]
	req.Params.Name = e.tool.Name
	return e.handle(ctx, req)
}
