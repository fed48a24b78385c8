package mcphttp_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"mime/multipart"
	"net/http"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/testenv"
)

// MCP shows uploaded attachments as metadata only ({attachment_id, name, media_type,
// size_bytes, sha256}) in every DTO reader, offers no tool that carries bytes, and keeps
// the non-empty body rule (an attachment-only message exists only over HTTP/CLI).
func TestMCPAttachmentMetadataOnly(t *testing.T) {
	t.Parallel()
	e := testenv.New(t)
	e.Box("alpha")
	a := e.NewAgent("alpha", "a", nil)
	b := e.NewAgent("alpha", "b", nil)
	a.Prime()
	data := []byte("bytes that never cross MCP")
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	in, _ := json.Marshal(map[string]any{"destination": map[string]any{"kind": "dm", "recipient_agent_id": b.ID}, "body_md": "see file", "idempotency_key": "up-1"})
	mw.WriteField("input", string(in))
	fw, _ := mw.CreateFormFile("file", "secret-free.txt")
	fw.Write(data)
	mw.Close()
	r := e.Do("POST", "/api/v1/boxes/alpha/messages", a.Key, buf.Bytes(), map[string]string{"Content-Type": mw.FormDataContentType()})
	if r.Status != http.StatusOK {
		t.Fatalf("upload: %s", r.Raw)
	}
	msgID := r.JSON()["message_id"].(string)
	sum := sha256.Sum256(data)

	cs := mcpSession(t, e, b.Key, "", nil)
	if p := toolCall(t, cs, "agent_prime", map[string]any{"box_key": "alpha"}); p.OK == nil {
		t.Fatalf("prime: %s", p.Text)
	}
	check := func(where string, msg map[string]any) {
		t.Helper()
		att, _ := msg["attachment"].(map[string]any)
		if len(att) != 5 || att["name"] != "secret-free.txt" || att["size_bytes"] != float64(len(data)) ||
			att["sha256"] != hex.EncodeToString(sum[:]) || att["media_type"] != "application/octet-stream" || att["attachment_id"] == nil {
			t.Fatalf("%s attachment: %v", where, att)
		}
	}
	got := toolCall(t, cs, "message_get", map[string]any{"box_key": "alpha", "message_id": msgID})
	check("message_get", got.OK)
	if strings.Contains(got.Text, "bytes that never cross") {
		t.Fatal("the text mirror carries the file's bytes")
	}
	inbox := toolCall(t, cs, "inbox_list", map[string]any{"box_key": "alpha"})
	check("inbox_list", inbox.OK["items"].([]any)[0].(map[string]any)["message"].(map[string]any))
	conv := toolCall(t, cs, "conversation_read", map[string]any{"box_key": "alpha", "destination": map[string]any{"kind": "dm", "recipient_agent_id": a.ID}})
	check("conversation_read", conv.OK["items"].([]any)[0].(map[string]any))

	tools, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range tools.Tools {
		raw, _ := json.Marshal(tool.InputSchema)
		if strings.Contains(tool.Name, "download") || strings.Contains(string(raw), `"binary"`) || strings.Contains(string(raw), "multipart") {
			t.Fatalf("tool %s carries bytes", tool.Name)
		}
	}
	empty := toolCall(t, cs, "message_send", map[string]any{"box_key": "alpha", "destination": map[string]any{"kind": "dm", "recipient_agent_id": a.ID},
		"body_md": "", "idempotency_key": "mcp-empty"})
	if empty.code() != "INVALID_ARGUMENT" || empty.reason() != "body_empty" {
		t.Fatalf("empty body over MCP: %s", empty.Text)
	}
}
