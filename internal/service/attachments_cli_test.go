package service_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/cli"
)

// The CLI uploads a local file with --attach (message send and send-batch) and downloads to
// an explicit --out path, printing the metadata; without --out it refuses. Not parallel: it
// sets the CLI's environment.
func TestAttachmentCLI(t *testing.T) {
	w := newWorld(t, "a", "b", "c")
	a, b, c, e := w.agents["a"], w.agents["b"], w.agents["c"], w.e
	t.Setenv("AGENTBOX_SERVER", e.URL)
	t.Setenv("AGENTBOX_API_KEY", a.Key)
	t.Setenv("AGENTBOX_BOX", "alpha")
	run := func(args ...string) (int, map[string]any, string) {
		var out, errb bytes.Buffer
		code := cli.Run(args, strings.NewReader(""), &out, &errb)
		var m map[string]any
		json.Unmarshal(out.Bytes(), &m)
		return code, m, errb.String()
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "notes.md")
	data := []byte("# notes\nsecond line\n")
	os.WriteFile(src, data, 0o600)

	in, _ := json.Marshal(map[string]any{"destination": dmTo(b), "body_md": "see the notes", "idempotency_key": newKey()})
	code, sent, stderr := run("message", "send", "--input", string(in), "--attach", src)
	if code != cli.ExitOK || sent["status"] != "sent" {
		t.Fatalf("send: exit %d %v %s", code, sent, stderr)
	}
	att := attachmentOf(t, b, sent["message_id"].(string))
	if att["name"] != "notes.md" || att["sha256"] != hexSHA(data) || att["media_type"] != "text/markdown; charset=utf-8" {
		t.Fatalf("stored: %v", att)
	}

	out := filepath.Join(dir, "copy.md")
	code, meta, stderr := run("attachment", "download", "--attachment-id", att["attachment_id"].(string), "--out", out)
	got, _ := os.ReadFile(out)
	if code != cli.ExitOK || !bytes.Equal(got, data) || meta["sha256"] != hexSHA(data) || meta["name"] != "notes.md" ||
		meta["size_bytes"] != float64(len(data)) || meta["out"] != out {
		t.Fatalf("download: exit %d %v %s", code, meta, stderr)
	}
	if code, _, _ := run("attachment", "download", "--attachment-id", att["attachment_id"].(string)); code != cli.ExitUsage {
		t.Fatalf("download without --out: exit %d", code)
	}
	// Batch with an empty body: one copy per target.
	bin, _ := json.Marshal(map[string]any{"recipient_agent_ids": []any{b.ID, c.ID}, "body_md": "", "idempotency_key": newKey()})
	code, res, stderr := run("message", "send-batch", "--input", string(bin), "--attach", src)
	if code != cli.ExitOK || len(res["results"].([]any)) != 2 {
		t.Fatalf("batch: exit %d %v %s", code, res, stderr)
	}
	if n := dbInt(t, e, `SELECT count(*) FROM attachments`); n != 3 {
		t.Fatalf("%d attachments after the batch", n)
	}
	// An unauthorized download is the uniform error, and writes nothing.
	t.Setenv("AGENTBOX_API_KEY", c.Key)
	missing := filepath.Join(dir, "never.md")
	if code, m, _ := run("attachment", "download", "--attachment-id", att["attachment_id"].(string), "--out", missing); code == cli.ExitOK ||
		m["error"].(map[string]any)["code"] != "NOT_FOUND_OR_FORBIDDEN" {
		t.Fatalf("c downloads a's DM to b: exit %d %v", code, m)
	}
	if _, err := os.Stat(missing); !os.IsNotExist(err) {
		t.Fatal("a refused download created --out")
	}
}
