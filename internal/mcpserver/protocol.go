package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"strings"

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
		// Most often a tools/call of a tool this key does not list: say so, without its name;
		// on 2026-07-28 also a request without the _meta the protocol requires.
		return "invalid params: no such tool for this key (tools/list names them), malformed params, " +
			"or (protocol 2026-07-28) no _meta io.modelcontextprotocol/protocolVersion, clientInfo and clientCapabilities"
	case mcp.CodeHeaderMismatch:
		return "header mismatch: MCP-Protocol-Version, Mcp-Method and Mcp-Name must be present and agree with the request body"
	case mcp.CodeMissingRequiredClientCapabilities:
		return "missing required client capabilities"
	case mcp.CodeUnsupportedProtocolVersion:
		return "unsupported protocol version: data.supported lists the versions this server speaks"
	default:
		return "request failed"
	}
}

// ProtocolErrorData is the only data a JSON-RPC error with code carries: for an unsupported
// protocol version, the versions this server speaks, which a client negotiates from and
// retries with (SEP-2575). The SDK's data also names the requested version, the caller's own
// value, so it is rebuilt rather than passed on. Nil for every other code.
func ProtocolErrorData(code int64) json.RawMessage {
	if code != mcp.CodeUnsupportedProtocolVersion {
		return nil
	}
	data, _ := json.Marshal(map[string][]string{"supported": mcp.SupportedProtocolVersions()}) // a map of strings cannot fail to marshal
	return data
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
		message := ProtocolErrorMessage(code)
		if code == jsonrpc.CodeInternalError && strings.Contains(r.Error.Error(), "invalid during session initialization") {
			// The SDK (v1.8) refuses a request before initialize with a plain error, which
			// would read as the server's own failure (-32603): it is the caller's to fix.
			code, message = jsonrpc.CodeInvalidRequest, "invalid request: initialize the session first (initialize, then notifications/initialized)"
		}
		fixed := *r
		fixed.Error = &jsonrpc.Error{Code: code, Message: message, Data: ProtocolErrorData(code)}
		msg = &fixed
	}
	return c.Connection.Write(ctx, msg)
}
