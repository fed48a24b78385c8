package reliability

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/testenv"
)

// startPgBouncer runs Debian's pgbouncer in transaction pooling mode in front of dbURL's
// server (on TCP or a unix socket) and returns the URL of the same database through it.
// Behind a transaction pooler without prepared-statement support (PgBouncer < 1.21; Debian 12
// ships 1.18) pgx needs default_query_exec_mode=cache_describe: statements are unnamed
// (re-parsed on whichever server connection runs them, in the same round trip) and their
// parameter and result types are described once and cached by the client, so json, uuid[] and
// every other parameter keeps its server-side type.
func startPgBouncer(t *testing.T, dbURL string) string {
	t.Helper()
	bin, err := exec.LookPath("pgbouncer")
	if err != nil {
		bin = "/usr/sbin/pgbouncer" // Debian's package does not put it on a user's PATH
		_, err = os.Stat(bin)
	}
	// Outside CI a missing pgbouncer skips, as the README says; in CI it fails.
	testenv.Need(t, err == nil, "pgbouncer is not installed", "apt-get install -y pgbouncer; .ci/run installs it")
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	// The server: host and port of a TCP URL, or the unix socket directory and port of the
	// harness's throwaway cluster (?host=/dir&port=N), which has no PostgreSQL on TCP.
	host, port := u.Hostname(), u.Port()
	if host == "" {
		host, port = u.Query().Get("host"), u.Query().Get("port")
	}
	if port == "" {
		port = "5432"
	}
	if host == "" {
		t.Fatal("pgbouncer: the database URL names no host or socket directory")
	}
	role := u.User.Username()
	if role == "" {
		role = "postgres"
	}
	dir, err := os.MkdirTemp("", "agentbox-pgbouncer-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	listen := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	ini := fmt.Sprintf(`[databases]
* = host=%s port=%s
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %d
unix_socket_dir =
auth_type = trust
auth_file = %s
pool_mode = transaction
max_client_conn = 2000
default_pool_size = 40
logfile = %s
pidfile = %s
`, host, port, listen, filepath.Join(dir, "users.txt"), filepath.Join(dir, "pgbouncer.log"), filepath.Join(dir, "pgbouncer.pid"))
	if err := os.WriteFile(filepath.Join(dir, "pgbouncer.ini"), []byte(ini), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "users.txt"), []byte(fmt.Sprintf("%q \"\"\n", role)), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, filepath.Join(dir, "pgbouncer.ini"))
	if os.Geteuid() == 0 { // pgbouncer refuses to run as root
		// It runs as the postgres user, or as the owner of the cluster's private (0700)
		// socket directory, the one user who can reach that server.
		var uid, gid int
		if fi, err := os.Stat(host); err == nil && fi.IsDir() {
			st := fi.Sys().(*syscall.Stat_t)
			uid, gid = int(st.Uid), int(st.Gid)
		} else {
			pu, err := user.Lookup("postgres")
			if err != nil {
				t.Fatal("running as root without a postgres user for pgbouncer")
			}
			uid, _ = strconv.Atoi(pu.Uid)
			gid, _ = strconv.Atoi(pu.Gid)
		}
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
	}
	out, _ := os.Create(filepath.Join(dir, "stderr"))
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }() //nolint:errcheck
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGINT) //nolint:errcheck
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill() //nolint:errcheck
			<-exited
		}
	})
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", listen))
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(dir, "stderr"))
			t.Fatalf("pgbouncer did not start: %s", log)
		}
		time.Sleep(20 * time.Millisecond)
	}
	via := *u
	via.Host = fmt.Sprintf("127.0.0.1:%d", listen)
	q := via.Query()
	q.Del("host") // a socket directory: the pooler is on TCP
	q.Del("port")
	q.Set("default_query_exec_mode", "cache_describe")
	via.RawQuery = q.Encode()
	return via.String()
}
