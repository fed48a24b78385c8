package server_test

import (
	"context"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentbox/agentbox/internal/migrate"
	"github.com/agentbox/agentbox/internal/testdb"
)

// TestExternalDatabaseStartWarnings: on an external database, serve warns at start about what
// only /readyz or a load balancer would otherwise show. Without AGENTBOX_ADMIN_TOKEN it uses a
// token of its own, which other instances on the database do not know: the warning says every
// instance needs the same one and names the file. A schema newer than the binary knows is
// named with both versions, and /readyz answers 503. With the token set and the schema
// current, nothing is warned.
func TestExternalDatabaseStartWarnings(t *testing.T) {
	t.Parallel()
	url := testdb.New(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	latest, err := migrate.Latest()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `INSERT INTO schema_migrations (version, name) VALUES ($1, 'from_a_newer_binary.sql')`, latest+1); err != nil {
		t.Fatal(err)
	}

	dir := dataDir(t)
	p := startServeOn(t, dir, url, "")
	p.waitListening(t)
	if status := readyz(t, p); status != http.StatusServiceUnavailable {
		t.Errorf("/readyz with a newer schema: %d, want 503", status)
	}
	log := p.stderr.String()
	for _, want := range []string{
		`level=WARN msg="AGENTBOX_ADMIN_TOKEN is not set: this server uses an admin token it generated; every instance on this database needs the same AGENTBOX_ADMIN_TOKEN`,
		`admin_token_file=` + filepath.Join(dir, "admin-token"),
		`level=WARN msg="the database schema is newer than this binary`,
		`/readyz answers 503 until an agentbox binary that knows the schema runs" schema_version=` + strconv.Itoa(latest+1) + ` binary_schema_version=` + strconv.Itoa(latest),
	} {
		if !strings.Contains(log, want) {
			t.Errorf("start log lacks %q:\n%s", want, log)
		}
	}
	p.stop(t)

	if _, err := conn.Exec(ctx, `DELETE FROM schema_migrations WHERE version = $1`, latest+1); err != nil {
		t.Fatal(err)
	}
	p = startServeOn(t, dir, url, "abadm_configured")
	p.waitListening(t)
	if status := readyz(t, p); status != http.StatusOK {
		t.Errorf("/readyz with the current schema: %d, want 200", status)
	}
	if log := p.stderr.String(); strings.Contains(log, "level=WARN") {
		t.Errorf("a start with the token set and the schema current warned:\n%s", log)
	}
	p.stop(t)
}

// startServeOn starts `agentbox serve` on the database at url, with AGENTBOX_ADMIN_TOKEN
// set to token ("": unset).
func startServeOn(t *testing.T, dir, url, token string) *proc {
	t.Helper()
	return launchServe(t, nil, []string{"AGENTBOX_DATABASE_URL=", "AGENTBOX_ADMIN_TOKEN=" + token}, nil, "--data-dir", dir, "--database-url", url)
}

// stop ends p with SIGTERM and waits for a clean exit.
func (p *proc) stop(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := p.wait(t, time.Minute); err != nil {
		t.Fatalf("serve after SIGTERM: %v\n%s", err, p.stderr)
	}
}

func readyz(t *testing.T, p *proc) int {
	t.Helper()
	resp, err := http.Get("http://" + p.addr + "/readyz")
	if err != nil {
		t.Fatalf("readyz: %v", err)
	}
	resp.Body.Close()
	return resp.StatusCode
}
