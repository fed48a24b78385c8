package mcpserver_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/apierr"
	"github.com/agentbox/agentbox/internal/mcpserver"
)

// TestCredentialsMustBeVisibleASCII: a key with a space, a line break, a control or a
// non-ASCII character could never be sent as a bearer token; it is refused naming where it
// came from (AGENTBOX_API_KEY, or AGENTBOX_CREDENTIALS and the box_key), never its value.
// Surrounding whitespace (a key file's line ending) is dropped.
func TestCredentialsMustBeVisibleASCII(t *testing.T) {
	const secret = "S3CRET"
	env := func(vars map[string]string) func(string) string {
		return func(k string) string { return vars[k] }
	}
	for _, bad := range []string{"abk_" + secret + "\ny", "abk_" + secret + " y", "abk_" + secret + "\x01", "abk_" + secret + "\u00e9", "abk_" + secret + "\x7f"} {
		_, err := mcpserver.CredentialsFromEnv(env(map[string]string{"AGENTBOX_API_KEY": bad}))
		if err == nil || !strings.Contains(err.Error(), "AGENTBOX_API_KEY") || strings.Contains(err.Error(), secret) {
			t.Errorf("AGENTBOX_API_KEY=%q: %v", bad, err)
		}
		path := filepath.Join(t.TempDir(), "credentials.json")
		if err := os.WriteFile(path, []byte(`{"alpha":"abk_fine","beta":`+strings.ReplaceAll(strings.ReplaceAll(
			`"`+bad+`"`, "\n", `\n`), "\x01", `\u0001`)+`}`), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err = mcpserver.CredentialsFromEnv(env(map[string]string{"AGENTBOX_CREDENTIALS": path}))
		if err == nil || !strings.Contains(err.Error(), "AGENTBOX_CREDENTIALS") || !strings.Contains(err.Error(), `"beta"`) || strings.Contains(err.Error(), secret) {
			t.Errorf("AGENTBOX_CREDENTIALS with %q: %v", bad, err)
		}
	}
	c, err := mcpserver.CredentialsFromEnv(env(map[string]string{"AGENTBOX_API_KEY": " abk_ok!~\n"}))
	if k, _ := c.Key("any"); err != nil || k != "abk_ok!~" {
		t.Errorf("a key with surrounding whitespace: %q, %v", k, err)
	}
	path := filepath.Join(t.TempDir(), "credentials.json")
	os.WriteFile(path, []byte(`{"alpha":"abk_a\n"}`), 0o600) //nolint:errcheck
	c, err = mcpserver.CredentialsFromEnv(env(map[string]string{"AGENTBOX_CREDENTIALS": path}))
	if k, _ := c.Key("alpha"); err != nil || k != "abk_a" {
		t.Errorf("a credentials file key with a line ending: %q, %v", k, err)
	}
}

// TestSessionFromEnv: AGENTBOX_SESSION follows the server's rule for the Agentbox-Session
// header (at most 128 printable ASCII characters), refused naming the variable, not its value.
func TestSessionFromEnv(t *testing.T) {
	for _, ok := range []string{"", "cli-1", "a session with spaces ~", strings.Repeat("s", 128)} {
		if s, err := mcpserver.SessionFromEnv(func(string) string { return ok }); err != nil || s != ok {
			t.Errorf("AGENTBOX_SESSION=%q: %q, %v", ok, s, err)
		}
	}
	const secret = "S3CRET"
	for _, bad := range []string{secret + "\x01", secret + "\n", secret + "\u00e9", secret + "\x7f", secret + strings.Repeat("s", 123)} {
		_, err := mcpserver.SessionFromEnv(func(string) string { return bad })
		if err == nil || !strings.Contains(err.Error(), "AGENTBOX_SESSION") || strings.Contains(err.Error(), secret) {
			t.Errorf("AGENTBOX_SESSION=%q: %v", bad, err)
		}
	}
}

// A success status whose body is not the operation's answer (another web server or a proxy
// answering 200) is not passed on as the tool's result: it is TEMPORARILY_UNAVAILABLE,
// reason unexpected_answer, as an error status without Agentbox's error body is. An answer
// that fits the operation's open output schema, extra fields included, is passed on.
func TestForwarderRefusesAnAnswerThatIsNotAgentboxs(t *testing.T) {
	body := `{"hello":"world"}`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, body) //nolint:errcheck
	}))
	defer srv.Close()
	creds, err := mcpserver.CredentialsFromEnv(func(k string) string {
		if k == "AGENTBOX_API_KEY" {
			return "abk_test"
		}
		return ""
	})
	if err != nil {
		t.Fatal(err)
	}
	f, err := mcpserver.NewForwarder(srv.URL, creds, "", srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	args := json.RawMessage(`{"box_key":"demo"}`)
	_, err = mcpserver.Invoke(context.Background(), f, "checkpoint_get", args, nil)
	if e, ok := apierr.As(err); !ok || e.Code != apierr.TemporarilyUnavailable || e.Reason != mcpserver.ReasonUnexpectedAnswer || strings.Contains(e.Message, "hello") {
		t.Fatalf("a 200 that is not Agentbox's: %v", err)
	}
	body = `{"revision":"0","checkpoint":{},"from_a_newer_server":true}`
	if got, err := mcpserver.Invoke(context.Background(), f, "checkpoint_get", args, nil); err != nil || !strings.Contains(string(got), "from_a_newer_server") {
		t.Fatalf("Agentbox's answer with an extra field: %s %v", got, err)
	}
}
