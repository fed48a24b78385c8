package mcphttp_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	genmcp "github.com/agentbox/agentbox/gen/mcp"
	"github.com/agentbox/agentbox/internal/mcpserver"
	"github.com/agentbox/agentbox/internal/service"
	"github.com/agentbox/agentbox/internal/testenv"
)

// mcpResponseFactor is the named ceiling of a whole tools/call answer relative to the tool's
// result budget: structuredContent plus the text mirror (the mirror re-escapes the JSON
// inside a JSON string, so it is a little more than the result itself), plus the envelope.
const (
	mcpResponseFactor   = 2.25
	mcpResponseOverhead = 512
)

// The worst-case values: the longest decimal string, timestamp and a string of n bytes
// that each serialize as a 6-byte \u00XX escape (control characters are valid text).
const (
	maxDec   = "9223372036854775807"
	maxInt   = int64(9223372036854775807)
	maxTime  = "2026-12-31T23:59:59.999999999Z"
	someUUID = "6f1c2a4e-8b7d-4c3e-9a1f-0e2d3c4b5a69"
)

func worstText(n int) string { return strings.Repeat("\x01", n) }

// worstCheckpoint is a checkpoint whose compact JSON is exactly the product cap.
func worstCheckpoint() json.RawMessage {
	prefix, suffix := `{"k":"`, `"}`
	n := (service.CheckpointMaxBytes - len(prefix) - len(suffix)) / 6
	b := []byte(prefix + strings.Repeat(`\u0001`, n) + strings.Repeat("x", service.CheckpointMaxBytes-len(prefix)-len(suffix)-6*n) + suffix)
	return b
}

// TestResultBudgetsPinWorstCase builds, for each tool it covers, the largest result the
// service can legally return under the default limits (checked against the strict output
// schema), and pins it under the tool's result_budget_bytes; the whole MCP tools/call answer
// (structuredContent + text mirror) stays under mcpResponseFactor times that budget.
func TestResultBudgetsPinWorstCase(t *testing.T) {
	t.Parallel()
	e := testenv.New(t)
	e.Box("alpha")
	a := e.NewAgent("alpha", "a", nil)
	limits := a.Prime()["limits"].(map[string]any)
	values := limits["values"].(map[string]any)
	pageMax, targetsMax := int(values["page_limit_max"].(float64)), int(values["targets_max"].(float64))
	limits["settings_revision"] = maxDec

	room := map[string]any{"room_id": someUUID, "name": worstText(service.RoomNameMaxBytes), "state": "invited",
		"status": "archived", "follow": "mentions", "brief_revision": maxDec}
	rooms := make([]any, pageMax)
	for i := range rooms {
		rooms[i] = room
	}
	invitees := make([]string, targetsMax)
	for i := range invitees {
		invitees[i] = someUUID
	}
	worst := map[string]any{
		"profile_get":     map[string]any{"text": worstText(service.ProfileMaxBytes), "profile_version": maxDec},
		"checkpoint_get":  map[string]any{"revision": maxDec, "checkpoint": worstCheckpoint(), "saved_at": maxTime, "saved_by_session_id": someUUID},
		"checkpoint_save": map[string]any{"revision": maxDec, "saved_at": maxTime},
		"message_send": map[string]any{"status": "duplicate", "message_id": someUUID, "message_seq": maxDec, "created_at": maxTime,
			"attention_count": maxInt, "request_count": maxInt, "dry_run": false},
		"room_create": map[string]any{"dry_run": false, "room_id": someUUID, "name": worstText(service.RoomNameMaxBytes), "owner_agent_id": someUUID,
			"history_visibility": "shared", "default_follow": "mentions", "status": "archived", "invited_agent_ids": invitees, "created_at": maxTime},
		"agent_prime": map[string]any{
			"agent":           map[string]any{"agent_id": someUUID, "name": strings.Repeat("n", 64), "box_key": strings.Repeat("b", 63)},
			"session":         map[string]any{"session_id": someUUID, "created": true},
			"profile":         map[string]any{"text": worstText(service.ProfileMaxBytes), "profile_version": maxDec},
			"checkpoint":      map[string]any{"revision": maxDec, "checkpoint_changed": true},
			"rooms":           rooms,
			"rooms_truncated": false,
			"counts":          map[string]any{"unread": maxInt, "pending_requests": maxInt, "leased_by_session": maxInt},
			"limits":          limits,
		},
	}

	bodies := map[string]json.RawMessage{}
	for name, v := range worst {
		tl, ok := genmcp.LookupTool(name)
		if !ok {
			t.Fatalf("no tool %s", name)
		}
		body, err := mcpserver.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if viol := genmcp.Operations[tl.OperationID].Output.ValidateJSON(body); viol != nil {
			t.Fatalf("%s: the constructed worst case is not a legal result: %v", name, viol)
		}
		bodies[tl.OperationID] = body
	}
	url, routerURL := cannedServer(t, bodies, false), cannedServer(t, bodies, true)
	pin := func(name string, result, wire int) {
		tl, _ := genmcp.LookupTool(name)
		ceiling := int(mcpResponseFactor*float64(tl.ResultBudgetBytes)) + mcpResponseOverhead
		t.Logf("%-16s worst-case result %7d bytes (budget %7d), tools/call answer %7d bytes (ceiling %7d)", name, result, tl.ResultBudgetBytes, wire, ceiling)
		if result > tl.ResultBudgetBytes {
			t.Errorf("%s: the worst-case result is %d bytes, over result_budget_bytes %d", name, result, tl.ResultBudgetBytes)
		}
		if wire > ceiling {
			t.Errorf("%s: the worst-case tools/call answer is %d bytes, over its ceiling %d", name, wire, ceiling)
		}
	}
	largest := ""
	for name := range worst {
		tl, _ := genmcp.LookupTool(name)
		pin(name, len(bodies[tl.OperationID]), toolsCallBytes(t, url, name, toolArgs(name)))
		if largest == "" || len(bodies[tl.OperationID]) > len(bodies[genmcp.Operations[largest].OperationID]) {
			largest = tl.OperationID
		}
	}
	// tool_execute returns {"result": …} of any tool: its worst case wraps the largest.
	pin("tool_execute", len(`{"result":}`)+len(bodies[largest]), toolsCallBytes(t, routerURL, "tool_execute",
		map[string]any{"box_key": "alpha", "name": largest, "arguments": toolArgs(largest)}))
}

// cannedBackend answers each operation with a fixed body.
type cannedBackend map[string]json.RawMessage

func (cannedBackend) CheckBox(context.Context, *mcp.CallToolRequest, string) error { return nil }

func (c cannedBackend) Call(_ context.Context, _ *mcp.CallToolRequest, op *genmcp.Operation, _ map[string]json.RawMessage) (json.RawMessage, error) {
	return c[op.OperationID], nil
}

func cannedServer(t *testing.T, bodies map[string]json.RawMessage, router bool) string {
	s := mcpserver.New(cannedBackend(bodies), mcpserver.Options{Router: router})
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s },
		&mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// toolArgs are valid arguments for the tools the budget test covers.
func toolArgs(tool string) map[string]any {
	switch tool {
	case "checkpoint_save":
		return map[string]any{"box_key": "alpha", "expected_revision": "0", "checkpoint": map[string]any{}, "idempotency_key": "k"}
	case "message_send":
		return map[string]any{"box_key": "alpha", "destination": map[string]any{"kind": "dm", "recipient_agent_id": someUUID}, "body_md": "x", "idempotency_key": "k"}
	case "room_create":
		return map[string]any{"box_key": "alpha", "name": "r", "idempotency_key": "k"}
	}
	return map[string]any{"box_key": "alpha"}
}

// toolsCallBytes is the size of the HTTP body answering one tools/call.
func toolsCallBytes(t *testing.T, url, tool string, args map[string]any) int {
	t.Helper()
	req := map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": map[string]any{"name": tool, "arguments": args}}
	raw, _ := json.Marshal(req)
	hr, _ := http.NewRequest("POST", url, strings.NewReader(string(raw)))
	hr.Header.Set("Content-Type", "application/json")
	hr.Header.Set("Accept", "application/json, text/event-stream")
	hr.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	resp, err := http.DefaultClient.Do(hr)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var m struct {
		Result struct {
			IsError bool `json:"isError"`
		} `json:"result"`
	}
	if json.Unmarshal(body, &m) != nil || m.Result.IsError {
		t.Fatalf("%s: %.300s", tool, body)
	}
	return len(body)
}
