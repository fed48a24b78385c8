package cli_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/cli"
	"github.com/agentbox/agentbox/internal/testenv"
)

// TestServerProblemsAreNotServerErrors: what goes wrong below the API is reported as what it
// is, alike for agent and admin commands, and never as a made-up TEMPORARILY_UNAVAILABLE:
// a malformed AGENTBOX_SERVER is a configuration error (exit 2, the variable named, not its
// value); an unreachable server (refused, https to a plain server) is exit 1 saying nothing
// was sent; an answer that is not Agentbox's is exit 1, an unexpected answer; a connection
// lost after the request went out is exit 1 saying how to repeat the command (a write with
// its idempotency key). The server's own TEMPORARILY_UNAVAILABLE still exits 7.
func TestServerProblemsAreNotServerErrors(t *testing.T) {
	t.Setenv("AGENTBOX_BOX", "demo")
	t.Setenv("AGENTBOX_API_KEY", "abk_test")
	t.Setenv("AGENTBOX_CREDENTIALS", "")
	t.Setenv("AGENTBOX_SESSION", "")
	t.Setenv("AGENTBOX_ADMIN_TOKEN", "admin-token")

	notFound := httptest.NewServer(http.NotFoundHandler()) // another web server: 404 text/plain
	defer notFound.Close()
	notImplemented := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNotImplemented) // no body at all
	}))
	defer notImplemented.Close()
	dropped := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body) //nolint:errcheck
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close() // the request arrived; no answer
		}
	}))
	defer dropped.Close()
	foreign := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body) //nolint:errcheck
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"hello":"world"}`) //nolint:errcheck // 200, JSON, not Agentbox's answer
	}))
	defer foreign.Close()
	busy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, `{"error":{"code":"TEMPORARILY_UNAVAILABLE","message":"the database is unreachable","retryable":true}}`) //nolint:errcheck
	}))
	defer busy.Close()

	const peer = "00000000-0000-4000-8000-000000000001"
	commands := map[string][]string{
		"agent read":  {"inbox", "list"},
		"agent write": {"message", "send", "--to", peer, "--body-md", "hi", "--idempotency-key", "key-1"},
		"upload":      {"message", "send", "--attach", "link_test.go", "--to", peer, "--body-md", "", "--idempotency-key", "key-2"},
		"download":    {"attachment", "download", "--attachment-id", peer, "--out", filepath.Join(t.TempDir(), "out")},
		"admin read":  {"admin", "box", "list"},
		"admin write": {"admin", "box", "create", "--key", "demo"},
	}
	const secret = "s3cretPW"
	for _, c := range []struct {
		server string
		code   int
		want   []string
		per    map[string]string // an extra expectation per command
	}{
		{server: "http://127.0.0.1:1", code: cli.ExitFailure,
			want: []string{"cannot reach the agentbox server at http://127.0.0.1:1 (AGENTBOX_SERVER)", "connection refused", "nothing was sent"}},
		{server: "notaurl", code: cli.ExitUsage, want: []string{"AGENTBOX_SERVER must be the agentbox server's URL: http:// or https://"}},
		{server: "127.0.0.1:8112", code: cli.ExitUsage, want: []string{"AGENTBOX_SERVER must be"}},
		{server: "http://admin:" + secret + "@", code: cli.ExitUsage, want: []string{"AGENTBOX_SERVER must be"}},
		{server: strings.Replace(notFound.URL, "http:", "https:", 1), code: cli.ExitFailure,
			want: []string{"cannot reach the agentbox server at https://", "is the server plain http://?", "nothing was sent"}},
		{server: notFound.URL, code: cli.ExitFailure,
			want: []string{"unexpected answer from " + notFound.URL + " (AGENTBOX_SERVER): status 404 (text/plain) without an Agentbox error body"}},
		{server: notImplemented.URL, code: cli.ExitFailure,
			want: []string{"unexpected answer from " + notImplemented.URL + " (AGENTBOX_SERVER): status 501"}},
		{server: foreign.URL, code: cli.ExitFailure,
			want: []string{"unexpected answer from AGENTBOX_SERVER: status 200 with a body that is not agentbox's", "did a proxy in front of it answer?"},
			per: map[string]string{
				"agent read":  "nothing was changed; repeat the command",
				"agent write": "the write may or may not have been applied: repeat it with --idempotency-key key-1",
				"upload":      "repeat it with --idempotency-key key-2",
				"download":    "nothing was written to --out",
				"admin read":  "nothing was changed; repeat the command",
				"admin write": "the change may or may not have been applied",
			}},
		{server: dropped.URL, code: cli.ExitFailure,
			want: []string{"the connection to the agentbox server at " + dropped.URL + " (AGENTBOX_SERVER) failed before its answer arrived"},
			per: map[string]string{
				"agent read":  "nothing was changed; repeat the command",
				"agent write": "the write may or may not have been applied: repeat it with --idempotency-key key-1",
				"upload":      "repeat it with --idempotency-key key-2",
				"download":    "nothing was changed; repeat the command",
				"admin read":  "nothing was changed; repeat the command",
				"admin write": "the change may or may not have been applied",
			}},
	} {
		t.Setenv("AGENTBOX_SERVER", c.server)
		for name, args := range commands {
			out, errOut, code := runText(args...)
			bad := code != c.code || out != "" || strings.Contains(errOut, "TEMPORARILY_UNAVAILABLE") || strings.Contains(errOut, secret)
			for _, w := range append(c.want, c.per[name]) {
				bad = bad || !strings.Contains(errOut, w)
			}
			if c.per == nil && strings.Contains(errOut, "retry") {
				bad = true // nothing to retry: the server never answered, or is not Agentbox
			}
			if bad {
				t.Errorf("AGENTBOX_SERVER=%s, %s: exit %d, stdout %q, stderr %q; want exit %d and %q %q", c.server, name, code, out, errOut, c.code, c.want, c.per[name])
			}
		}
	}

	// The server's own TEMPORARILY_UNAVAILABLE is its answer: on stdout, exit 7.
	t.Setenv("AGENTBOX_SERVER", busy.URL)
	for name, args := range commands {
		out, errOut, code := runText(args...)
		var got struct {
			Error struct {
				Code string `json:"code"`
			} `json:"error"`
		}
		if code != cli.ExitRetryable || json.Unmarshal([]byte(out), &got) != nil || got.Error.Code != "TEMPORARILY_UNAVAILABLE" {
			t.Errorf("%s against the server's TEMPORARILY_UNAVAILABLE: exit %d, stdout %q, stderr %q", name, code, out, errOut)
		}
	}
}

// TestMalformedCredentialsAreUsageErrors: a key, admin token or session in the environment
// that cannot be sent as a header (a line break, a control or non-ASCII character, a space in
// a key) is a bad environment — exit 2, the variable named and never its value, nothing sent
// — not an unreachable server.
func TestMalformedCredentialsAreUsageErrors(t *testing.T) {
	requests := 0
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests++
		http.NotFound(w, r)
	}))
	defer server.Close()
	t.Setenv("AGENTBOX_SERVER", server.URL)
	t.Setenv("AGENTBOX_BOX", "demo")

	const secret = "S3CRET"
	creds := filepath.Join(t.TempDir(), "credentials.json")
	if err := os.WriteFile(creds, []byte(`{"demo":"abk_`+secret+`\nx"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	const peer = "00000000-0000-4000-8000-000000000001"
	agentCommands := [][]string{
		{"prime"},
		{"message", "send", "--to", peer, "--body-md", "hi"},
		{"message", "send", "--attach", "link_test.go", "--to", peer, "--body-md", "", "--idempotency-key", "key-2"},
		{"attachment", "download", "--attachment-id", peer, "--out", filepath.Join(t.TempDir(), "out")},
	}
	for _, c := range []struct {
		env      map[string]string
		variable string
		commands [][]string
	}{
		{map[string]string{"AGENTBOX_API_KEY": "abk_" + secret + "\ny"}, "AGENTBOX_API_KEY", append(agentCommands, []string{"mcp"})},
		{map[string]string{"AGENTBOX_API_KEY": "abk_" + secret + " y"}, "AGENTBOX_API_KEY", agentCommands},
		{map[string]string{"AGENTBOX_API_KEY": "abk_" + secret + "\u00e9"}, "AGENTBOX_API_KEY", agentCommands},
		{map[string]string{"AGENTBOX_CREDENTIALS": creds}, "AGENTBOX_CREDENTIALS", append(agentCommands, []string{"mcp"})},
		{map[string]string{"AGENTBOX_API_KEY": "abk_ok", "AGENTBOX_SESSION": "bad" + secret + "\x01"}, "AGENTBOX_SESSION", append(agentCommands, []string{"mcp"})},
		{map[string]string{"AGENTBOX_API_KEY": "abk_ok", "AGENTBOX_SESSION": "bad" + secret + "\n"}, "AGENTBOX_SESSION", agentCommands},
		{map[string]string{"AGENTBOX_API_KEY": "abk_ok", "AGENTBOX_SESSION": secret + "\u00e9"}, "AGENTBOX_SESSION", agentCommands},
		{map[string]string{"AGENTBOX_API_KEY": "abk_ok", "AGENTBOX_SESSION": "  "}, "AGENTBOX_SESSION", append(agentCommands, []string{"mcp"})},
		{map[string]string{"AGENTBOX_ADMIN_TOKEN": "tok" + secret + "\nx"}, "AGENTBOX_ADMIN_TOKEN", [][]string{{"admin", "box", "list"}, {"admin", "box", "create", "--key", "demo"}}},
		{map[string]string{"AGENTBOX_ADMIN_TOKEN": "tok" + secret + "\x7f"}, "AGENTBOX_ADMIN_TOKEN", [][]string{{"admin", "box", "list"}}},
	} {
		for _, v := range []string{"AGENTBOX_API_KEY", "AGENTBOX_CREDENTIALS", "AGENTBOX_SESSION", "AGENTBOX_ADMIN_TOKEN"} {
			t.Setenv(v, c.env[v])
		}
		for _, args := range c.commands {
			out, errOut, code := runText(args...)
			if code != cli.ExitUsage || out != "" || !strings.Contains(errOut, c.variable) || strings.Contains(errOut, secret) ||
				strings.Contains(errOut, "cannot reach") || requests != 0 {
				t.Errorf("%s=%q, %v: exit %d, stdout %q, stderr %q, %d requests; want exit 2 naming %s, not its value, nothing sent",
					c.variable, c.env[c.variable], args, code, out, errOut, requests, c.variable)
			}
		}
	}
}

// TestMCPStartRefusesWhatIsNotAgentbox: `agentbox mcp` checks AGENTBOX_SERVER at start. A
// value that is no http(s) URL is a usage error (as for every command); a server that answers
// as something else (another web server, the right one under a path) ends the process with
// the mistake on stderr (exit 1), where a model would otherwise be told to retry every call
// for ever; a server that does not answer yet is only warned about (it may start later).
func TestMCPStartRefusesWhatIsNotAgentbox(t *testing.T) {
	e := testenv.New(t)
	e.Box("alpha")
	a := e.NewAgent("alpha", "a", nil)
	t.Setenv("AGENTBOX_API_KEY", a.Key)
	t.Setenv("AGENTBOX_CREDENTIALS", "")
	t.Setenv("AGENTBOX_SESSION", "")
	t.Setenv("AGENTBOX_BOX", "alpha")
	notImplemented := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNotImplemented)
	}))
	defer notImplemented.Close()
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	for _, c := range []struct {
		server string
		code   int
		stderr string
	}{
		{"ftp://example.com", cli.ExitUsage, "AGENTBOX_SERVER must be"},
		{notImplemented.URL, 1, "does not answer as the agentbox server"},
		{e.URL + "/sub", 1, "does not answer as the agentbox server"},
		{closed.URL, 0, "does not answer yet"},
		{e.URL, 0, ""},
	} {
		t.Setenv("AGENTBOX_SERVER", c.server)
		out, errOut, code := runText("mcp") // stdin is empty: a process that starts ends at once
		if code != c.code || out != "" || !strings.Contains(errOut, c.stderr) {
			t.Errorf("AGENTBOX_SERVER=%s: exit %d, stdout %q, stderr %q; want exit %d with %q", c.server, code, out, errOut, c.code, c.stderr)
		}
	}
}

// A box_key no box can have, in AGENTBOX_BOX or as a credentials file's name, ends
// `agentbox mcp` at once (exit 2) saying which variable, never echoing it: started, every call
// would be AUTH_FAILED and the start check would blame the key.
func TestMCPStartRefusesAMalformedBox(t *testing.T) {
	e := testenv.New(t)
	e.Box("alpha")
	a := e.NewAgent("alpha", "a", nil)
	t.Setenv("AGENTBOX_SERVER", e.URL)
	t.Setenv("AGENTBOX_SESSION", "")
	t.Setenv("AGENTBOX_CREDENTIALS", "")
	t.Setenv("AGENTBOX_API_KEY", a.Key)
	t.Setenv("AGENTBOX_BOX", "BAD BOX")
	out, errOut, code := runText("mcp")
	if code != cli.ExitUsage || out != "" || !strings.Contains(errOut, "AGENTBOX_BOX is not a box_key") || strings.Contains(errOut, "BAD BOX") {
		t.Errorf("AGENTBOX_BOX malformed: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	creds := filepath.Join(t.TempDir(), "credentials.json")
	if err := os.WriteFile(creds, []byte(`{"Alpha Box":"`+a.Key+`"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AGENTBOX_BOX", "")
	t.Setenv("AGENTBOX_API_KEY", "")
	t.Setenv("AGENTBOX_CREDENTIALS", creds)
	out, errOut, code = runText("mcp")
	if code != cli.ExitUsage || out != "" || !strings.Contains(errOut, "is not a box_key") || strings.Contains(errOut, "Alpha Box") {
		t.Errorf("a credentials file with a malformed box_key: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

// TestMCPStartChecksAsTheKey: the start check of `agentbox mcp` asks GET /me as the key of
// the box it knows, so a good key costs the server no failed authentication (a 401 counted,
// "agent authentication failed" logged at every process start would feed auth-failure
// alerts); with a credentials file it asks as the key of the box it checks. A key the server
// refuses is said on stderr, naming the box, and asked about once; the process still starts.
func TestMCPStartChecksAsTheKey(t *testing.T) {
	e := testenv.New(t)
	e.Box("alpha")
	e.Box("beta")
	a := e.NewAgent("alpha", "a", nil)
	b := e.NewAgent("beta", "b", nil)
	meGets := func(status string) int {
		t.Helper()
		v := e.MetricSample(`agentbox_requests_total{operation="me_get",transport="http",status="` + status + `"}`)
		if v == "" {
			return 0
		}
		n, err := strconv.Atoi(v)
		if err != nil {
			t.Fatalf("me_get %s: %q", status, v)
		}
		return n
	}
	creds := filepath.Join(t.TempDir(), "credentials.json")
	if err := os.WriteFile(creds, []byte(`{"alpha":"`+a.Key+`","beta":"`+b.Key+`"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AGENTBOX_SERVER", e.URL)
	t.Setenv("AGENTBOX_SESSION", "")
	for _, c := range []struct {
		name                  string
		key, credentials, box string
		refused               bool
	}{
		{name: "single key of AGENTBOX_BOX", key: a.Key, box: "alpha"},
		{name: "credentials file", credentials: creds},
		{name: "credentials file, AGENTBOX_BOX its second box", credentials: creds, box: "beta"},
		{name: "a key of another box", key: a.Key, box: "beta", refused: true},
	} {
		t.Setenv("AGENTBOX_API_KEY", c.key)
		t.Setenv("AGENTBOX_CREDENTIALS", c.credentials)
		t.Setenv("AGENTBOX_BOX", c.box)
		ok0, refused0 := meGets("200"), meGets("401")
		out, errOut, code := runText("mcp") // stdin is empty: a process that starts ends at once
		if code != cli.ExitOK || out != "" {
			t.Errorf("%s: exit %d, stdout %q, stderr %q", c.name, code, out, errOut)
		}
		ok, refused := meGets("200")-ok0, meGets("401")-refused0
		switch {
		case !c.refused && (refused != 0 || ok != 1 || errOut != ""):
			t.Errorf("%s: me_get answered 200 ×%d, 401 ×%d, stderr %q; want one 200, no 401, nothing on stderr", c.name, ok, refused, errOut)
		case c.refused && (refused != 1 || !strings.Contains(errOut, "refuses this process's key") || !strings.Contains(errOut, "box_key=beta") ||
			strings.Contains(errOut, a.Key)):
			t.Errorf("%s: me_get answered 401 ×%d, stderr %q; want one 401 and the refusal named for box beta (never the key)", c.name, refused, errOut)
		}
	}
}
