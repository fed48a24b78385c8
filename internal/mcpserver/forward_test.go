package mcpserver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

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
	for _, blank := range []string{" ", "  ", "\t"} {
		if _, err := mcpserver.SessionFromEnv(func(string) string { return blank }); err == nil || !strings.Contains(err.Error(), "AGENTBOX_SESSION") {
			t.Errorf("AGENTBOX_SESSION=%q (would reach the server as no header, the key's lane): %v", blank, err)
		}
	}
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

// A forwarded call whose request went out but whose answer never came back (the server took
// the whole request and then the connection closed: killed while COMMIT was in flight, say)
// may have been applied: it is the server's outcome_unknown (TEMPORARILY_UNAVAILABLE,
// retryable), telling a write to retry with the same idempotency_key and a read to retry —
// never "cannot be reached", which a model may retry with a new key and write twice. So is an
// answer cut off after its status. A call that never reached the server (connection
// refused) stays "cannot be reached", without a reason.
func TestForwarderLostAnswerIsOutcomeUnknown(t *testing.T) {
	dropped := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body) //nolint:errcheck
		if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
			conn.Close() // the request arrived; no answer
		}
	}))
	defer dropped.Close()
	cut := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body) //nolint:errcheck
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", "1000")
		w.WriteHeader(http.StatusOK)
		io.WriteString(w, `{"message_id":`) //nolint:errcheck
		w.(http.Flusher).Flush()
		if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
			conn.Close() // the answer is cut off after its status
		}
	}))
	defer cut.Close()
	refused := httptest.NewServer(http.NotFoundHandler())
	refusedURL := refused.URL
	refused.Close() // nothing listens there: connection refused

	creds, err := mcpserver.CredentialsFromEnv(func(k string) string {
		if k == "AGENTBOX_API_KEY" {
			return "abk_test"
		}
		return ""
	})
	if err != nil {
		t.Fatal(err)
	}
	const (
		peer    = "00000000-0000-4000-8000-000000000001"
		send    = `{"box_key":"demo","destination":{"kind":"dm","recipient_agent_id":"` + peer + `"},"body_md":"hi","idempotency_key":"send-1"}`
		dryRun  = `{"box_key":"demo","destination":{"kind":"dm","recipient_agent_id":"` + peer + `"},"body_md":"hi","idempotency_key":"send-1","dry_run":true}`
		sameKey = "retry with the same idempotency_key: if the write committed, the retry returns its original result"
	)
	calls := []struct {
		name, tool, args, suggestion string
		applied                      bool // the message says the call may have been applied
	}{
		{"write", "message_send", send, sameKey, true},
		{"dry run", "message_send", dryRun, "retry", false},
		{"read", "checkpoint_get", `{"box_key":"demo"}`, "retry", false},
		{"naturally idempotent write", "agent_prime", `{"box_key":"demo"}`, "retry: repeating this call is safe", true},
	}
	for _, srv := range []*httptest.Server{dropped, cut} {
		// As `agentbox mcp` builds it (RunStdio): its own HTTP client.
		f, err := mcpserver.NewForwarder(srv.URL, creds, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range calls {
			_, err := mcpserver.Invoke(context.Background(), f, c.tool, json.RawMessage(c.args), nil)
			e, ok := apierr.As(err)
			if !ok || e.Code != apierr.TemporarilyUnavailable || !e.Retryable || e.Reason != "outcome_unknown" ||
				e.SuggestedAction != c.suggestion || !strings.Contains(e.Message, "failed before its answer arrived") ||
				strings.Contains(e.Message, "may or may not have been applied") != c.applied {
				t.Errorf("%s, %s: %#v", srv.URL, c.name, err)
				continue
			}
			if got, want := fieldNames(t, e), fieldNames(t, apierr.OutcomeUnknown()); got != want {
				t.Errorf("%s, %s: fields %s, want the server's outcome_unknown's %s", srv.URL, c.name, got, want)
			}
		}
	}

	f, err := mcpserver.NewForwarder(refusedURL, creds, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range calls {
		_, err := mcpserver.Invoke(context.Background(), f, c.tool, json.RawMessage(c.args), nil)
		if e, ok := apierr.As(err); !ok || e.Code != apierr.TemporarilyUnavailable || !e.Retryable || e.Reason != "" ||
			e.Message != "the agentbox server at "+refusedURL+" (AGENTBOX_SERVER) cannot be reached; retry" {
			t.Errorf("refused, %s: %#v", c.name, err)
		}
	}
}

// fieldNames are the JSON members of an error object, sorted.
func fieldNames(t *testing.T, e *apierr.Error) string {
	t.Helper()
	raw, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Strings(names)
	return strings.Join(names, ",")
}

// The same through `agentbox mcp` (RunStdio), as a client sees it: a tools/call whose answer
// was lost is an error result whose structuredContent.error is outcome_unknown.
func TestStdioLostAnswerIsOutcomeUnknown(t *testing.T) {
	var posts atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body) //nolint:errcheck
		if r.Method == http.MethodPost {
			posts.Add(1)
		}
		if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
			conn.Close() // the request arrived (the start check's too); no answer
		}
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
	in := strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"message_send","arguments":{"box_key":"demo",` +
			`"destination":{"kind":"dm","recipient_agent_id":"00000000-0000-4000-8000-000000000001"},"body_md":"hi","idempotency_key":"send-1"}}}`,
	}, "\n") + "\n"
	var out bytes.Buffer // RunStdio serializes its writes and has made them all when it returns
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := mcpserver.RunStdio(ctx, mcpserver.StdioConfig{Server: srv.URL, Credentials: creds, Box: "demo", Session: "s", Version: "test"},
		io.NopCloser(strings.NewReader(in)), nopCloser{&out}); err != nil {
		t.Fatalf("RunStdio: %v", err)
	}
	var answer struct {
		Result struct {
			IsError           bool        `json:"isError"`
			StructuredContent apierr.Body `json:"structuredContent"`
		} `json:"result"`
	}
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		if strings.Contains(line, `"id":2`) {
			json.Unmarshal([]byte(line), &answer) //nolint:errcheck // checked below
		}
	}
	e := answer.Result.StructuredContent.Error
	if posts.Load() != 1 || !answer.Result.IsError || e == nil || e.Code != apierr.TemporarilyUnavailable || !e.Retryable ||
		e.Reason != "outcome_unknown" || !strings.Contains(e.SuggestedAction, "same idempotency_key") {
		t.Fatalf("message_send whose answer was lost (%d sent): %s", posts.Load(), out.String())
	}
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }
