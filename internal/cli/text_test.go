package cli_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/agentbox/agentbox/internal/cli"
	"github.com/agentbox/agentbox/internal/testenv"
)

// TestInvalidTextRefusedAsTheServerRefusesIt: text PostgreSQL cannot store (invalid UTF-8,
// NUL) in any string flag — a scalar, a repeatable array, a query, an agent name, inside a
// JSON flag, an admin field or a file's text — is INVALID_ARGUMENT invalid_text with the
// field the server names, the same error object the server answers (exit 2), the value never
// echoed, and no request sent (encoding/json would have sent U+FFFD, and the server stored
// it).
func TestInvalidTextRefusedAsTheServerRefusesIt(t *testing.T) {
	e := testenv.New(t)
	e.Box("demo")
	planner := e.NewAgent("demo", "planner", nil)
	coder := e.NewAgent("demo", "coder", map[string]any{"listed": true})
	var requests atomic.Int64 // every request of the CLI passes here
	target, _ := url.Parse(e.URL)
	proxy := httputil.NewSingleHostReverseProxy(target)
	counted := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		proxy.ServeHTTP(w, r)
	}))
	defer counted.Close()
	t.Setenv("AGENTBOX_SERVER", counted.URL)
	t.Setenv("AGENTBOX_BOX", "demo")
	t.Setenv("AGENTBOX_API_KEY", planner.Key)
	t.Setenv("AGENTBOX_SESSION", "")
	t.Setenv("AGENTBOX_CREDENTIALS", "")
	t.Setenv("AGENTBOX_ADMIN_TOKEN", testenv.AdminToken)
	if _, errOut, code := runText("prime"); code != cli.ExitOK {
		t.Fatalf("prime: exit %d, %s", code, errOut)
	}

	// The server's own answers, which the CLI's must equal.
	serverBody := e.Do("POST", "/api/v1/boxes/demo/messages", planner.Key, []byte(`{"destination":{"kind":"dm","recipient_agent_id":"`+
		coder.ID.String()+"\"},\"body_md\":\"zq\xff\",\"idempotency_key\":\"raw-1\"}"), nil)
	serverQuery := e.Do("GET", "/api/v1/boxes/demo/directory?query=zq%FF", planner.Key, nil, nil)
	serverNUL := e.Do("POST", "/api/v1/boxes/demo/messages", planner.Key, []byte(`{"destination":{"kind":"dm","recipient_agent_id":"`+
		coder.ID.String()+`"},"body_md":"zq\u0000","idempotency_key":"raw-2"}`), nil)
	for _, r := range []testenv.Response{serverBody, serverQuery, serverNUL} {
		if r.Status != http.StatusBadRequest || r.Code() != "INVALID_ARGUMENT" {
			t.Fatalf("the server's answer: %d %s", r.Status, r.Raw)
		}
	}
	invalidUTF8 := serverBody.JSON()["error"].(map[string]any)
	nul := serverNUL.JSON()["error"].(map[string]any)
	like := func(server map[string]any, field string) map[string]any {
		want := map[string]any{}
		for k, v := range server {
			want[k] = v
		}
		want["field"] = field
		return want
	}

	badProfile := filepath.Join(t.TempDir(), "profile.md")
	if err := os.WriteFile(badProfile, []byte("You plan.\xfe"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args  []string
		value string // what must not be echoed
		want  map[string]any
	}{
		// A string flag, and NUL.
		{[]string{"message", "send", "--to", "coder", "--body-md", "zq\xff"}, "zq\xff", serverBody.JSON()["error"].(map[string]any)},
		{[]string{"message", "send", "--to", "coder", "--body-md", "zq\x00"}, "zq\x00", nul},
		// A query flag.
		{[]string{"directory", "search", "--query", "zq\xff"}, "zq\xff", serverQuery.JSON()["error"].(map[string]any)},
		// Repeatable (array) flags, plain and naming agents.
		{[]string{"inbox", "ack", "--inbox-seqs", "1", "--inbox-seqs", "2\xff"}, "2\xff", like(invalidUTF8, "inbox_seqs[1]")},
		{[]string{"message", "send", "--to", "coder", "--body-md", "ok", "--mention-agent-ids", "coder", "--mention-agent-ids", "co\xffder"}, "co\xffder",
			like(invalidUTF8, "mention_agent_ids[1]")},
		// A tool's own flags, a JSON flag, the box and a JSON input.
		{[]string{"message", "send", "--to", "co\xffder", "--body-md", "ok"}, "co\xffder", like(invalidUTF8, "destination.recipient_agent_id")},
		{[]string{"message", "send", "--to-room", "ro\xffom", "--body-md", "ok"}, "ro\xffom", like(invalidUTF8, "destination.room_id")},
		{[]string{"message", "send", "--to", "coder", "--body-md", "ok", "--payload", "{\"note\": [\"ok\", \"zq\xff\"]}"}, "zq\xff", like(invalidUTF8, "payload.note[1]")},
		{[]string{"checkpoint", "get", "--box", "de\xffmo"}, "de\xffmo", like(invalidUTF8, "box_key")},
		{[]string{"message", "send", "--to", "coder", "--input", "{\"body_md\": \"zq\xff\"}"}, "zq\xff", like(invalidUTF8, "body_md")},
		// Admin commands: body and path fields, arrays, a file's text.
		{[]string{"admin", "box", "create", "--key", "demo2", "--name", "zq\xff"}, "zq\xff", like(invalidUTF8, "name")},
		{[]string{"admin", "host", "create", "--box", "demo", "--name", "h2", "--ip", "127.0.0.2", "--ip", "1\xff"}, "1\xff", like(invalidUTF8, "ips[1]")},
		{[]string{"admin", "agent", "create", "--box", "demo", "--host", "local", "--name", "x", "--role", "zq\x00"}, "zq\x00", like(nul, "role")},
		{[]string{"admin", "agent", "disable", "--box", "demo", "--agent", "pl\xffanner"}, "pl\xffanner", like(invalidUTF8, "agent_ref")},
		{[]string{"admin", "agent", "set-profile", "--box", "demo", "--agent", "planner", "--file", badProfile}, "You plan.", like(invalidUTF8, "text")},
	} {
		before := requests.Load()
		out, errOut, code := runText(c.args...)
		var got struct {
			Error map[string]any `json:"error"`
		}
		if code != cli.ExitUsage || json.Unmarshal([]byte(out), &got) != nil || !reflect.DeepEqual(got.Error, c.want) || errOut == "" {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want exit 2 and %v", c.args, code, out, errOut, c.want)
			continue
		}
		replaced := strings.ToValidUTF8(c.value, "\uFFFD")
		if strings.Contains(out+errOut, c.value) || strings.Contains(out+errOut, replaced) {
			t.Errorf("%q: the value is echoed: %q %q", c.args, out, errOut)
		}
		if n := requests.Load() - before; n != 0 {
			t.Errorf("%q: %d requests sent", c.args, n)
		}
	}
	var messages, boxes int
	pool := e.Store.Pool()
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM messages`).Scan(&messages); err != nil {
		t.Fatal(err)
	}
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM boxes WHERE box_key = 'demo2'`).Scan(&boxes); err != nil {
		t.Fatal(err)
	}
	if messages != 0 || boxes != 0 {
		t.Fatalf("refused commands wrote %d messages, %d boxes", messages, boxes)
	}

	// An uploaded file's name is refused as the server refuses it, before the upload.
	dir := t.TempDir()
	file := filepath.Join(dir, "no\xfftes.md")
	if err := os.WriteFile(file, []byte("notes"), 0o600); err != nil {
		t.Fatal(err)
	}
	before := requests.Load()
	out, _, code := runText("message", "send", "--attach", file, "--to", coder.ID.String(), "--body-md", "", "--idempotency-key", "up-1")
	if code != cli.ExitUsage || !strings.Contains(out, `"field": "file"`) || !strings.Contains(out, `"reason": "invalid_upload"`) || requests.Load() != before {
		t.Fatalf("--attach with a name the server refuses: exit %d, %q, %d requests", code, out, requests.Load()-before)
	}
}
