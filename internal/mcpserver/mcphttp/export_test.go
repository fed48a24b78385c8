package mcphttp

import (
	"encoding/json"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbox/agentbox/internal/mcpserver"
)

// NewSDKOnly is New with every request served by the SDK, to compare with the fast path.
func NewSDKOnly(cfg Config) http.Handler {
	cfg.sdkOnly = true
	return New(cfg)
}

// FastPathShape reports whether the fast path takes a request of these headers and body
// (the tool name aside).
func FastPathShape(r *http.Request, body []byte) bool {
	f := &fastCalls{}
	_, _, _, ok := f.parse(r, body)
	return ok && f.eligibleHeaders(r)
}

// SuccessResponses encodes a success result of body (the shape mcpserver's successResult
// builds) for id in both protocol generations, by the one-pass encoder (nil if it declined)
// and by the SDK's encoding.
func SuccessResponses(calls *mcpserver.Calls, id jsonrpc.ID, body string, v2026 bool) (fast, sdk []byte, err error) {
	f := newFastCalls(calls, calls)
	res := func() *mcp.CallToolResult {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: body}}, StructuredContent: json.RawMessage(body)}
	}
	fast = f.successResponse(id, res(), v2026, calls)
	sdk, err = sdkResponse(id, res(), nil, v2026, calls)
	return fast, sdk, err
}
