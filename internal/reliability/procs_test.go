// Package reliability is the project's own fault suite (`make reliability`, SPEC §10, §12):
// real `agentbox serve` processes on one database, directly or behind PgBouncer in
// transaction pooling mode, killed with SIGKILL under load, and PostgreSQL restarts on a
// cluster of the suite's own. Short versions run in `make test`; RELIABILITY_FULL=1 runs the
// full sizes.
package reliability

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// full reports whether the full-size runs were asked for (make reliability).
func full() bool { return os.Getenv("RELIABILITY_FULL") == "1" }

// agentboxBin is the agentbox binary the suite runs (one build per test process).
func agentboxBin(t testing.TB) string { return testenv.AgentboxBinary(t) }

// proc is one `agentbox serve` process.
type proc struct {
	t      testing.TB
	dbURL  string
	addr   string // host:port, kept across restarts
	dir    string
	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
	log    *bytes.Buffer
}

// startServer starts `agentbox serve` on dbURL on a free loopback port.
func startServer(t testing.TB, dbURL string) *proc {
	t.Helper()
	p := &proc{t: t, dbURL: dbURL, addr: "127.0.0.1:0", dir: t.TempDir()}
	p.start()
	t.Cleanup(func() {
		p.stop()
		if t.Failed() {
			p.mu.Lock()
			out := p.log.String()
			p.mu.Unlock()
			if len(out) > 4000 {
				out = out[len(out)-4000:]
			}
			t.Logf("server %s log (tail):\n%s", p.addr, out)
		}
	})
	return p
}

func (p *proc) start() {
	p.t.Helper()
	addrFile := filepath.Join(p.dir, "addr")
	os.Remove(addrFile)
	cmd := exec.Command(agentboxBin(p.t), "serve", "--addr", p.addr, "--addr-file", addrFile, "--database-url", p.dbURL)
	cmd.Env = append(os.Environ(), "AGENTBOX_ADMIN_TOKEN="+testenv.AdminToken)
	// The server keeps its data directory (upload staging) under its working directory:
	// the test's own, never the source tree.
	cmd.Dir = p.dir
	log := &bytes.Buffer{}
	cmd.Stdout, cmd.Stderr = io.Discard, &lockedWriter{w: log}
	if err := cmd.Start(); err != nil {
		p.t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }() //nolint:errcheck
	p.mu.Lock()
	p.cmd, p.exited, p.log = cmd, exited, log
	p.mu.Unlock()
	deadline := time.Now().Add(60 * time.Second)
	for {
		if b, err := os.ReadFile(addrFile); err == nil && len(b) > 0 {
			p.addr = strings.TrimSpace(string(b))
			break
		}
		select {
		case <-exited:
			p.t.Fatalf("agentbox serve exited at start:\n%s", log.String())
		default:
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("agentbox serve did not start:\n%s", log.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	for time.Now().Before(deadline) {
		if r, err := http.Get(p.url() + "/healthz"); err == nil {
			r.Body.Close()
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	p.t.Fatal("agentbox serve does not answer /healthz")
}

func (p *proc) url() string { return "http://" + p.addr }

// kill9 kills the process with SIGKILL and waits for it to be gone.
func (p *proc) kill9() {
	p.mu.Lock()
	cmd, exited := p.cmd, p.exited
	p.mu.Unlock()
	cmd.Process.Kill() //nolint:errcheck
	<-exited
}

func (p *proc) stop() {
	p.mu.Lock()
	cmd, exited := p.cmd, p.exited
	p.mu.Unlock()
	if cmd != nil && cmd.Process != nil {
		cmd.Process.Signal(os.Interrupt) //nolint:errcheck
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			cmd.Process.Kill() //nolint:errcheck
			<-exited
		}
	}
}

// env is a testenv.Env for the process's URL (Admin, NewAgent and Agent.Call work on it).
func (p *proc) env(t testing.TB) *testenv.Env {
	return &testenv.Env{T: t, URL: p.url()}
}

type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

// call is a load client's request: no test failure on transport errors (the server may be
// down), the status and body otherwise.
type answer struct {
	status int
	body   map[string]any
	err    error
}

var loadClient = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}

func do(ctx context.Context, url, method, path, bearer string, body any) answer {
	raw, err := json.Marshal(body)
	if err != nil {
		return answer{err: err}
	}
	req, err := http.NewRequestWithContext(ctx, method, url+path, bytes.NewReader(raw))
	if err != nil {
		return answer{err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+bearer)
	resp, err := loadClient.Do(req)
	if err != nil {
		return answer{err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return answer{err: err}
	}
	a := answer{status: resp.StatusCode}
	if err := json.Unmarshal(b, &a.body); err != nil {
		a.err = errors.New("answer is not JSON")
	}
	return a
}

func (a answer) code() string {
	if e, ok := a.body["error"].(map[string]any); ok {
		s, _ := e["code"].(string)
		return s
	}
	return ""
}

func (a answer) reason() string {
	if e, ok := a.body["error"].(map[string]any); ok {
		s, _ := e["reason"].(string)
		return s
	}
	return ""
}

func (a answer) retryable() bool {
	if e, ok := a.body["error"].(map[string]any); ok {
		b, _ := e["retryable"].(bool)
		return b
	}
	return false
}
