package mcpserver

import (
	"context"
	"errors"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Protocol errors never echo caller-supplied values (SPEC §13.2). The SDK's JSON-RPC error
// messages can quote the request (the params that failed to decode, a method name), so every
// JSON-RPC error this server sends carries only its code and the fixed message for it.

// ProtocolErrorMessage is the only message a JSON-RPC error with code carries.
func ProtocolErrorMessage(code int64) string {
	switch code {
	case jsonrpc.CodeParseError:
		return "parse error"
	case jsonrpc.CodeInvalidRequest:
		return "invalid request"
	case jsonrpc.CodeMethodNotFound:
		return "method not found"
	case jsonrpc.CodeInvalidParams:
		// Most often a tools/call of a tool this key does not list: say so, without its name.
		return "invalid params: no such tool for this key (tools/list names them), or malformed params"
	default:
		return "request failed"
	}
}

// fixedErrorTransport rewrites the JSON-RPC errors written to a transport (stdio).
type fixedErrorTransport struct{ mcp.Transport }

func (t fixedErrorTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return fixedErrorConn{c}, nil
}

type fixedErrorConn struct{ mcp.Connection }

func (c fixedErrorConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if r, ok := msg.(*jsonrpc.Response); ok && r.Error != nil {
		code := int64(jsonrpc.CodeInternalError)
		var we *jsonrpc.Error
		if errors.As(r.Error, &we) {
			code = we.Code
		}
		fixed := *r
		fixed.Error = &jsonrpc.Error{Code: code, Message: ProtocolErrorMessage(code)}
		msg = &fixed
	}
	return c.Connection.Write(ctx, msg)
}
