package server_test

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/testenv"
)

// These tests run the real binary: what is under test is how the process and its
// embedded cluster end, which an in-process server cannot show.

func TestMain(m *testing.M) { testenv.Main(m) }

func agentboxBinary(t *testing.T) string { return testenv.AgentboxBinary(t) }

// dataDir is a fresh, not yet existing data directory the cluster user can reach (as
// root the cluster runs unprivileged, and t.TempDir's parent is 0700).
func dataDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.Chmod(filepath.Dir(dir), 0o755); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, "data")
}

// proc is a running `agentbox serve`.
type proc struct {
	cmd      *exec.Cmd
	stderr   *syncBuffer
	addr     string
	done     chan struct{}
	err      error // Wait's result, after done
	addrFile string
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startServe starts `agentbox serve` on dir and an ephemeral port; stderr goes to w (a
// buffer when nil). It does not wait for readiness.
func startServe(t *testing.T, dir string, w io.Writer) *proc {
	t.Helper()
	return startServeVia(t, dir, w)
}

// startServeVia is startServe run through the command wrapper (nohup, say).
func startServeVia(t *testing.T, dir string, w io.Writer, wrapper ...string) *proc {
	t.Helper()
	return launchServe(t, w, []string{"AGENTBOX_DATABASE_URL=", "AGENTBOX_ADMIN_TOKEN="}, wrapper, "--data-dir", dir)
}

// launchServe starts `agentbox serve` on an ephemeral port (run through wrapper when given)
// with args added and env added to this process's environment; output goes to w (p.stderr
// when nil). It does not wait for readiness; the process is killed when the test ends.
func launchServe(t *testing.T, w io.Writer, env, wrapper []string, args ...string) *proc {
	t.Helper()
	p := &proc{stderr: &syncBuffer{}, done: make(chan struct{}), addrFile: filepath.Join(t.TempDir(), "addr")}
	argv := append(append(append([]string{}, wrapper...), agentboxBinary(t), "serve", "--addr", "127.0.0.1:0", "--addr-file", p.addrFile), args...)
	p.cmd = exec.Command(argv[0], argv[1:]...)
	p.cmd.Env = append(os.Environ(), env...)
	if w == nil {
		w = p.stderr
	}
	p.cmd.Stdout, p.cmd.Stderr = w, w
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		p.cmd.Process.Kill() //nolint:errcheck
		<-p.done
	})
	return p
}

func (p *proc) waitListening(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		if b, err := os.ReadFile(p.addrFile); err == nil {
			p.addr = strings.TrimSpace(string(b))
			return
		}
		select {
		case <-p.done:
			t.Fatalf("serve exited before listening: %v\n%s", p.err, p.stderr)
		case <-time.After(20 * time.Millisecond):
		}
	}
	t.Fatalf("serve not listening within the deadline\n%s", p.stderr)
}

func (p *proc) wait(t *testing.T, d time.Duration) error {
	t.Helper()
	select {
	case <-p.done:
		return p.err
	case <-time.After(d):
		t.Fatalf("serve did not exit within %v\n%s", d, p.stderr)
		return nil
	}
}

func (p *proc) ready(t *testing.T) {
	t.Helper()
	resp, err := http.Get("http://" + p.addr + "/readyz")
	if err != nil {
		t.Fatalf("readyz: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("readyz: status %d", resp.StatusCode)
	}
}

// postmasterPID reads the embedded cluster's postmaster PID.
func postmasterPID(t *testing.T, dir string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "pgdata", "postmaster.pid"))
	if err != nil {
		t.Fatal(err)
	}
	first, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(first))
	if err != nil || pid <= 0 {
		t.Fatalf("postmaster.pid: %q", first)
	}
	return pid
}

// waitGone polls until pid no longer exists (or is a zombie nobody has reaped yet).
func waitGone(t *testing.T, pid int, what string) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) {
		if !alive(pid) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s (PID %d) still runs", what, pid)
}

func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(stat, ')')
	return !(i > 0 && i+2 < len(stat) && stat[i+2] == 'Z')
}

func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}

// TestSecondServerOnOneDataDir: a second server on the same data directory fails at once,
// naming the holder's PID, and the first keeps serving on the same cluster.
func TestSecondServerOnOneDataDir(t *testing.T) {
	t.Parallel()
	dir := dataDir(t)
	first := startServe(t, dir, nil)
	first.waitListening(t)
	pm := postmasterPID(t, dir)

	second := startServe(t, dir, nil)
	err := second.wait(t, 30*time.Second)
	if exitCode(err) != 1 {
		t.Fatalf("second serve: %v, want exit 1\n%s", err, second.stderr)
	}
	want := fmt.Sprintf("--data-dir %s is in use by another agentbox server (PID %d)", dir, first.cmd.Process.Pid)
	if !strings.Contains(second.stderr.String(), want) {
		t.Fatalf("second serve's error:\n%s\nwant it to contain %q", second.stderr, want)
	}
	first.ready(t)
	if got := postmasterPID(t, dir); got != pm || !alive(pm) {
		t.Fatalf("first cluster's postmaster changed: %d → %d (alive %v)", pm, got, alive(pm))
	}
	if err := first.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := first.wait(t, time.Minute); err != nil {
		t.Fatalf("first serve: %v\n%s", err, first.stderr)
	}
	waitGone(t, pm, "postmaster")
}

// TestHangupStopsCluster: SIGHUP (a closed terminal, a dropped SSH session) shuts the
// server down cleanly, and its postmaster is gone.
func TestHangupStopsCluster(t *testing.T) {
	t.Parallel()
	dir := dataDir(t)
	p := startServe(t, dir, nil)
	p.waitListening(t)
	pm := postmasterPID(t, dir)
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	if err := p.wait(t, time.Minute); err != nil {
		t.Fatalf("serve after SIGHUP: %v, want a clean exit\n%s", err, p.stderr)
	}
	waitGone(t, pm, "postmaster after SIGHUP")
}

// TestClosedStderrStopsCluster: `agentbox serve | tee log` where tee has gone: every
// later write to stderr hits a closed pipe (SIGPIPE). The shutdown still completes and
// stops the postmaster.
func TestClosedStderrStopsCluster(t *testing.T) {
	t.Parallel()
	dir := dataDir(t)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	p := startServe(t, dir, w)
	w.Close()
	lines := bufio.NewScanner(r)
	for lines.Scan() && !strings.Contains(lines.Text(), "agentbox: listening on") {
	}
	p.waitListening(t)
	pm := postmasterPID(t, dir)
	r.Close() // the reader goes away, as tee does
	if err := p.cmd.Process.Signal(syscall.SIGPIPE); err != nil {
		t.Fatal(err)
	}
	p.ready(t) // a SIGPIPE alone is no reason to stop
	if err := p.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if err := p.wait(t, time.Minute); err != nil {
		t.Fatalf("serve with a closed stderr: %v, want a clean exit", err)
	}
	waitGone(t, pm, "postmaster after a shutdown with a closed stderr")
}

// TestKilledServerCluster: a server killed outright (SIGKILL: no handler runs) does not
// strand its cluster: the postmaster shuts itself down, and the next server on the same
// data directory starts without any advice to the user.
func TestKilledServerCluster(t *testing.T) {
	t.Parallel()
	dir := dataDir(t)
	p := startServe(t, dir, nil)
	p.waitListening(t)
	pm := postmasterPID(t, dir)
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	p.wait(t, time.Minute) //nolint:errcheck // killed
	next := startServe(t, dir, nil)
	next.waitListening(t)
	next.ready(t)
	waitGone(t, pm, "the killed server's postmaster")
	if got := postmasterPID(t, dir); got == pm {
		t.Fatal("the next server reports the old postmaster")
	}
	if err := next.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := next.wait(t, time.Minute); err != nil {
		t.Fatalf("next serve: %v\n%s", err, next.stderr)
	}
}

// TestFailedStartLeavesNoDataDir: a start that fails (here: the address cannot be bound,
// after the cluster came up) removes the data directory it created and stops the cluster.
func TestFailedStartLeavesNoDataDir(t *testing.T) {
	t.Parallel()
	dir := dataDir(t)
	cmd := exec.Command(agentboxBinary(t), "serve", "--addr", "256.0.0.1:1", "--data-dir", dir)
	cmd.Env = append(os.Environ(), "AGENTBOX_DATABASE_URL=", "AGENTBOX_ADMIN_TOKEN=")
	out, err := cmd.CombinedOutput()
	if exitCode(err) != 1 {
		t.Fatalf("serve on an unusable address: %v, want exit 1\n%s", err, out)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("failed start left %s (stat: %v)\n%s", dir, err, out)
	}
}

// TestServeRefusesBadStartArguments: a listen address without a usable port and an admin
// token the admin CLI could never send are usage errors (exit 2) before anything starts: no
// data directory, no cluster, and the token is never echoed.
func TestServeRefusesBadStartArguments(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ name, addr, token, want string }{
		{"port out of range", "127.0.0.1:99999", "", "--addr must be host:port"},
		{"no port", "127.0.0.1", "", "--addr must be host:port"},
		{"token with a space", "127.0.0.1:0", "secret-part other-part", "AGENTBOX_ADMIN_TOKEN is not an admin token"},
		{"token with a control character", "127.0.0.1:0", "secret-part\x01", "AGENTBOX_ADMIN_TOKEN is not an admin token"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir := dataDir(t)
			cmd := exec.Command(agentboxBinary(t), "serve", "--addr", c.addr, "--data-dir", dir)
			cmd.Env = append(os.Environ(), "AGENTBOX_DATABASE_URL=", "AGENTBOX_ADMIN_TOKEN="+c.token)
			out, err := cmd.CombinedOutput()
			if exitCode(err) != 2 || !strings.Contains(string(out), c.want) || strings.Contains(string(out), "secret-part") {
				t.Fatalf("serve: %v, want exit 2 saying %q (never the token)\n%s", err, c.want, out)
			}
			if _, err := os.Stat(dir); !os.IsNotExist(err) {
				t.Fatalf("refused start left %s (stat: %v)\n%s", dir, err, out)
			}
		})
	}
}

// TestStartWithoutADatabase: a database URL nothing answers at is said so plainly, at once
// (serve does not wait for the database), and the start leaves no data directory behind.
func TestStartWithoutADatabase(t *testing.T) {
	t.Parallel()
	// The second password has an unencoded '@' and '#': the parser reads its end as part of
	// the host, which the connection error quotes; it is masked all the same.
	for _, url := range []string{"postgres://postgres:not-shown@127.0.0.1:1/agentbox", "postgres://postgres:a@b#not-shown@127.0.0.1:1/agentbox"} {
		dir := dataDir(t)
		cmd := exec.Command(agentboxBinary(t), "serve", "--addr", "127.0.0.1:0", "--data-dir", dir, "--database-url", url)
		cmd.Env = append(os.Environ(), "AGENTBOX_DATABASE_URL=", "AGENTBOX_ADMIN_TOKEN=")
		out, err := cmd.CombinedOutput()
		if exitCode(err) != 1 || !strings.Contains(string(out), "cannot reach the database") || strings.Contains(string(out), "not-shown") {
			t.Fatalf("serve with no database answering: %v, want exit 1 saying so (without the password)\n%s", err, out)
		}
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Fatalf("failed start left %s (stat: %v)\n%s", dir, err, out)
		}
	}
}

// TestFailedStartLeavesNoStateCluster: as root with a data directory the cluster user cannot
// reach, the cluster is made in the state directory (/var/lib/agentbox/clusters/<hash>); a
// first start that fails after making it leaves neither the data directory nor that cluster.
func TestFailedStartLeavesNoStateCluster(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("only root keeps clusters in the state directory")
	}
	t.Parallel()
	private := filepath.Dir(dataDir(t))
	if err := os.Chmod(private, 0o700); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(private, "data")
	sum := sha256.Sum256([]byte(dir))
	state := filepath.Join("/var/lib/agentbox/clusters", hex.EncodeToString(sum[:8]))
	t.Cleanup(func() { os.RemoveAll(state) }) //nolint:errcheck
	cmd := exec.Command(agentboxBinary(t), "serve", "--addr", "256.0.0.1:1", "--data-dir", dir)
	cmd.Env = append(os.Environ(), "AGENTBOX_DATABASE_URL=", "AGENTBOX_ADMIN_TOKEN=")
	out, err := cmd.CombinedOutput()
	if exitCode(err) != 1 || !strings.Contains(string(out), "lives outside --data-dir") {
		t.Fatalf("serve on an unusable address with the cluster in the state directory: %v, want exit 1 after the cluster started\n%s", err, out)
	}
	for _, p := range []string{dir, state} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Fatalf("failed start left %s (stat: %v)\n%s", p, err, out)
		}
	}
}

// TestDeadClusterStopsServer: when the embedded PostgreSQL dies under a running server (here:
// its postmaster is killed), the server does not stay up answering TEMPORARILY_UNAVAILABLE
// for ever: it stops with an error that says so, and the next start recovers the cluster.
func TestDeadClusterStopsServer(t *testing.T) {
	t.Parallel()
	dir := dataDir(t)
	p := startServe(t, dir, nil)
	p.waitListening(t)
	p.ready(t)
	pm := postmasterPID(t, dir)
	if err := syscall.Kill(pm, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	err := p.wait(t, time.Minute)
	if exitCode(err) != 1 || !strings.Contains(p.stderr.String(), "embedded PostgreSQL") || !strings.Contains(p.stderr.String(), "exited unexpectedly") {
		t.Fatalf("serve after its postmaster died: %v, want exit 1 saying why\n%s", err, p.stderr)
	}
	next := startServe(t, dir, nil)
	next.waitListening(t)
	next.ready(t)
	if err := next.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := next.wait(t, time.Minute); err != nil {
		t.Fatalf("next serve: %v\n%s", err, next.stderr)
	}
}

// clusterPIDs are the postmaster pm and its children (the backends and helpers).
func clusterPIDs(t *testing.T, pm int) []int {
	t.Helper()
	pids := []int{pm}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		fields := strings.Fields(string(stat[i+1:])) // state, ppid, ...
		if len(fields) > 1 && fields[1] == strconv.Itoa(pm) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// TestShutdownWhileDatabaseHangs: a database that hangs rather than dies (its processes
// stopped: connections open, nothing answers) holds neither /readyz, which answers 503
// within its bound, nor a requested shutdown: a request stuck on the database is abandoned
// at the end of the grace (and said so in the log), and the server exits cleanly.
func TestShutdownWhileDatabaseHangs(t *testing.T) {
	t.Parallel()
	dir := dataDir(t)
	p := startServe(t, dir, nil)
	p.waitListening(t)
	p.ready(t)
	token, err := os.ReadFile(filepath.Join(dir, "admin-token"))
	if err != nil {
		t.Fatal(err)
	}
	pids := clusterPIDs(t, postmasterPID(t, dir))
	signalAll := func(sig syscall.Signal) {
		for _, pid := range pids {
			syscall.Kill(pid, sig) //nolint:errcheck // a helper may have exited
		}
	}
	signalAll(syscall.SIGSTOP)
	t.Cleanup(func() { signalAll(syscall.SIGCONT) })

	stuck := make(chan error, 1)
	go func() {
		req, _ := http.NewRequest("GET", "http://"+p.addr+"/admin/api/v1/boxes", nil)
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		stuck <- err
	}()
	// /readyz answers within its own bound; by then the admin call above is in flight.
	resp, err := http.Get("http://" + p.addr + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("readyz while the database hangs: %d", resp.StatusCode)
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(time.Minute); !strings.Contains(p.stderr.String(), "were abandoned"); {
		if time.Now().After(deadline) {
			t.Fatalf("no abandoned requests logged\n%s", p.stderr)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := <-stuck; err == nil {
		t.Fatal("the stuck call got an answer; want its connection closed")
	}
	signalAll(syscall.SIGCONT) // the cluster itself can now stop as usual
	if err := p.wait(t, time.Minute); err != nil {
		t.Fatalf("serve after SIGTERM with a hung database: %v, want a clean exit\n%s", err, p.stderr)
	}
}

// TestNohupKeepsServing: started with SIGHUP ignored (nohup), the server keeps it ignored:
// a closed terminal does not stop it; SIGTERM still does.
func TestNohupKeepsServing(t *testing.T) {
	t.Parallel()
	nohup, err := exec.LookPath("nohup")
	if err != nil {
		t.Skip("no nohup on this machine")
	}
	p := startServeVia(t, dataDir(t), nil, nohup)
	p.waitListening(t)
	// The kernel's word for it: SIGHUP (bit 0) is still in the process's ignored set once it
	// listens (a handler installed for it would have taken it out).
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, _ := strings.Cut(string(status), "SigIgn:")
	ignored, err := strconv.ParseUint(strings.TrimSpace(strings.SplitN(rest, "\n", 2)[0]), 16, 64)
	if err != nil || ignored&1 == 0 {
		t.Fatalf("SIGHUP is not ignored under nohup (SigIgn %q, %v)", strings.SplitN(rest, "\n", 2)[0], err)
	}
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	p.ready(t)
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := p.wait(t, time.Minute); err != nil {
		t.Fatalf("serve after SIGTERM: %v\n%s", err, p.stderr)
	}
}
