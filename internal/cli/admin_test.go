package cli_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/cli"
	"github.com/agentbox/agentbox/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// run executes one command line in process and returns stdout, stderr and the exit code.
func run(t *testing.T, args ...string) (map[string]any, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	code := cli.Run(args, strings.NewReader(""), &out, &errb)
	var m map[string]any
	if out.Len() > 0 {
		if err := json.Unmarshal(out.Bytes(), &m); err != nil {
			t.Fatalf("%v: stdout is not one JSON object: %q", args, out.String())
		}
		if b := out.Bytes(); b[len(b)-1] != '\n' || bytes.HasSuffix(b, []byte("\n\n")) {
			t.Fatalf("%v: stdout does not end with exactly one newline: %q", args, out.String())
		}
	}
	return m, errb.String(), code
}

func TestAdminCLI(t *testing.T) {
	e := testenv.New(t)
	t.Setenv("AGENTBOX_SERVER", e.URL)
	t.Setenv("AGENTBOX_ADMIN_TOKEN", testenv.AdminToken)

	mustRun := func(args ...string) map[string]any {
		t.Helper()
		m, stderr, code := run(t, args...)
		if code != cli.ExitOK {
			t.Fatalf("%v: exit %d, stderr %s, stdout %v", args, code, stderr, m)
		}
		return m
	}
	mustRun("admin", "box", "create", "--key", "demo", "--name", "Demo")
	mustRun("admin", "host", "create", "--box", "demo", "--name", "laptop", "--ip", "127.0.0.1", "--ip", "::1")
	profile := filepath.Join(t.TempDir(), "profile.md")
	os.WriteFile(profile, []byte("You plan."), 0o600) //nolint:errcheck
	created := mustRun("admin", "agent", "create", "--box", "demo", "--host", "laptop", "--name", "planner", "--listed", "--profile-file", profile)
	key, _ := created["api_key"].(string)
	if !strings.HasPrefix(key, "abk_") || created["agent"].(map[string]any)["listed"] != true {
		t.Fatalf("agent create: %v", created)
	}
	// The key works for the agent.
	if r := e.Do("GET", "/api/v1/boxes/demo/me", key, nil, nil); r.Status != 200 {
		t.Fatalf("new key: %d %s", r.Status, r.Raw)
	}
	if p := mustRun("admin", "agent", "set-profile", "--box", "demo", "--agent", "planner", "--file", profile); p["profile_version"] != "1" {
		t.Fatalf("set-profile with the same text: %v", p)
	}
	if p := mustRun("admin", "agent", "get-profile", "--box", "demo", "--agent", "planner"); p["text"] != "You plan." || p["profile_version"] != "1" {
		t.Fatalf("get-profile: %v", p)
	}
	os.WriteFile(profile, []byte("You plan, then report."), 0o600) //nolint:errcheck
	if p := mustRun("admin", "agent", "set-profile", "--box", "demo", "--agent", "planner", "--file", profile); p["profile_version"] != "2" {
		t.Fatalf("set-profile: %v", p)
	}
	k2 := mustRun("admin", "key", "create", "--box", "demo", "--agent", "planner", "--router")
	if k2["router"] != true || k2["api_key"] == key {
		t.Fatalf("key create: %v", k2)
	}
	mustRun("admin", "key", "revoke", "--box", "demo", "--key-id", k2["key_id"].(string))
	if r := e.Do("GET", "/api/v1/boxes/demo/me", k2["api_key"].(string), nil, nil); r.Code() != "AUTH_FAILED" {
		t.Fatalf("revoked key still works: %s", r.Raw)
	}
	if s := mustRun("admin", "settings", "set", "--box", "demo", "--json", `{"lease_default_seconds":90}`); s["settings_revision"] != "2" {
		t.Fatalf("settings set: %v", s)
	}
	if s := mustRun("admin", "settings", "get", "--box", "demo"); s["settings"].(map[string]any)["lease_default_seconds"] != float64(90) {
		t.Fatalf("settings get: %v", s)
	}
	// --json goes to the server as given: a value of the wrong type, an out-of-range one and
	// an unknown key are the server's INVALID_ARGUMENT naming the field, never Go's decoder.
	for _, c := range []struct{ json, field string }{
		{`{"page_limit_default":"x"}`, "page_limit_default"},
		{`{"page_limit_default":-1}`, "page_limit_default"},
		{`{"page_limit_default":1.5}`, "page_limit_default"},
		{`{"no_such_setting":1}`, "no_such_setting"},
	} {
		m, stderr, code := run(t, "admin", "settings", "set", "--box", "demo", "--json", c.json)
		got, _ := m["error"].(map[string]any)
		if code != cli.ExitUsage || got["code"] != "INVALID_ARGUMENT" || !strings.Contains(fmt.Sprint(got["field"]), c.field) ||
			strings.Contains(stderr, "Go struct") || strings.Contains(stderr, "int64") {
			t.Fatalf("settings set --json %s: exit %d, stdout %v, stderr %q", c.json, code, m, stderr)
		}
	}
	if m, stderr, code := run(t, "admin", "settings", "set", "--box", "demo", "--json", `{"lease_default_seconds":91}`, "--expected-revision", "1"); code != cli.ExitConflict {
		t.Fatalf("settings set from a stale revision: exit %d, stdout %v, stderr %q", code, m, stderr)
	}
	if m, stderr, code := run(t, "admin", "settings", "set", "--box", "demo", "--json", `[1]`); code != cli.ExitUsage || m != nil || !strings.Contains(stderr, "--json") {
		t.Fatalf("settings set --json [1]: exit %d, stdout %v, stderr %q", code, m, stderr)
	}
	if s := mustRun("admin", "settings", "set", "--box", "demo", "--json", `{"lease_default_seconds":92}`, "--expected-revision", "2"); s["settings_revision"] != "3" ||
		s["settings"].(map[string]any)["lease_default_seconds"] != float64(92) {
		t.Fatalf("settings set with --expected-revision: %v", s)
	}
	if a := mustRun("admin", "agent", "set-listed", "--box", "demo", "--agent", "planner", "--listed", "false"); a["listed"] != false {
		t.Fatalf("set-listed: %v", a)
	}
	if a := mustRun("admin", "agent", "disable", "--box", "demo", "--agent", "planner"); a["enabled"] != false {
		t.Fatalf("disable: %v", a)
	}
	if r := e.Do("GET", "/api/v1/boxes/demo/me", key, nil, nil); r.Code() != "AUTH_FAILED" {
		t.Fatalf("disabled agent still authenticates: %s", r.Raw)
	}
	mustRun("admin", "agent", "enable", "--box", "demo", "--agent", "planner")
	mustRun("admin", "box", "disable", "--key", "demo")
	if r := e.Do("GET", "/api/v1/boxes/demo/me", key, nil, nil); r.Code() != "AUTH_FAILED" {
		t.Fatalf("disabled box still authenticates: %s", r.Raw)
	}
	mustRun("admin", "box", "enable", "--key", "demo")
	if r := e.Do("GET", "/api/v1/boxes/demo/me", key, nil, nil); r.Status != 200 {
		t.Fatalf("re-enabled: %s", r.Raw)
	}

	// Issued admin tokens: created (shown once), listed without secrets, revoked by ID.
	tok := mustRun("admin", "token", "create", "--label", "ci")
	secret, _ := tok["token"].(string)
	if list := mustRun("admin", "token", "list"); len(list["items"].([]any)) != 1 || strings.Contains(fmt.Sprint(list), secret) ||
		list["items"].([]any)[0].(map[string]any)["token_id"] != tok["token_id"] {
		t.Fatalf("token list: %v", list)
	}
	if r := mustRun("admin", "token", "revoke", "--token-id", tok["token_id"].(string)); r["revoked_at"] == nil {
		t.Fatalf("token revoke: %v", r)
	}
	if r := e.Do("GET", "/admin/api/v1/boxes", secret, nil, nil); r.Code() != "AUTH_FAILED" {
		t.Fatalf("a revoked admin token still works: %s", r.Raw)
	}
	if _, _, code := run(t, "admin", "token", "revoke", "--token-id", "not-a-uuid"); code != cli.ExitUsage {
		t.Fatalf("token revoke --token-id not-a-uuid: exit %d", code)
	}

	// Exit codes per error class; errors are JSON on stdout and one line on stderr.
	if m, stderr, code := run(t, "admin", "settings", "get", "--box", "nosuch"); code != cli.ExitNotFound || m["error"] == nil || stderr == "" {
		t.Fatalf("not found: exit %d %v %q", code, m, stderr)
	}
	if _, _, code := run(t, "admin", "box", "create", "--key", "demo"); code != cli.ExitUsage {
		t.Fatalf("duplicate box: exit %d", code)
	}
	if _, _, code := run(t, "admin", "host", "create", "--box", "demo"); code != cli.ExitUsage {
		t.Fatalf("missing flags: exit %d", code)
	}
	if _, _, code := run(t, "admin", "nonsense", "verb"); code != cli.ExitUsage {
		t.Fatalf("unknown command: exit %d", code)
	}
	t.Setenv("AGENTBOX_ADMIN_TOKEN", "wrong")
	if _, _, code := run(t, "admin", "box", "list"); code != cli.ExitAuth {
		t.Fatalf("bad token: exit %d", code)
	}
}

// TestAdminEnableDisableTakeNoListed: only agent set-listed has --listed (SPEC §15); on
// enable and disable it is an unknown flag (exit 2, nothing sent), not silently ignored.
func TestAdminEnableDisableTakeNoListed(t *testing.T) {
	requests := 0
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests++
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"agent_id":"00000000-0000-4000-8000-000000000001","enabled":true,"listed":false}`) //nolint:errcheck
	}))
	defer server.Close()
	t.Setenv("AGENTBOX_SERVER", server.URL)
	t.Setenv("AGENTBOX_ADMIN_TOKEN", "admin-token")
	for _, verb := range []string{"enable", "disable"} {
		if help, _, _ := runText("admin", "agent", verb, "--help"); strings.Contains(help, "--listed") {
			t.Errorf("agent %s --help lists --listed:\n%s", verb, help)
		}
		out, errOut, code := runText("admin", "agent", verb, "--box", "demo", "--agent", "quiet", "--listed", "true")
		if code != cli.ExitUsage || out != "" || !strings.Contains(errOut, "--listed") || requests != 0 {
			t.Errorf("agent %s --listed true: exit %d, stdout %q, stderr %q, %d requests", verb, code, out, errOut, requests)
		}
	}
	if help, _, _ := runText("admin", "agent", "set-listed", "--help"); !strings.Contains(help, "* --listed") {
		t.Errorf("agent set-listed --help lacks --listed:\n%s", help)
	}
}
