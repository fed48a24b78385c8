package cli_test

import (
	"bytes"
	"encoding/json"
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
