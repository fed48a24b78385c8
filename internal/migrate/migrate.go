// Package migrate applies the embedded schema migrations (queries/schema) in order.
// It is safe to run from several server processes at once: each migration commits with its
// version row under a transaction-level advisory lock.
package migrate

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentbox/agentbox/queries"
)

// lockID is the advisory lock key that serializes migration runs ("agentbox" in ASCII).
const lockID int64 = 0x6167656e74626f78

// Migration is one embedded schema file.
type Migration struct {
	Version int
	Name    string
	SQL     string
}

// All returns the embedded migrations sorted by version.
func All() ([]Migration, error) {
	entries, err := fs.ReadDir(queries.Migrations, "schema")
	if err != nil {
		return nil, err
	}
	var out []Migration
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".sql") {
			continue
		}
		num, _, ok := strings.Cut(name, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || len(num) != 4 {
			return nil, fmt.Errorf("migration %q: name must be NNNN_description.sql", name)
		}
		body, err := fs.ReadFile(queries.Migrations, "schema/"+name)
		if err != nil {
			return nil, err
		}
		out = append(out, Migration{Version: v, Name: name, SQL: string(body)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	for i := range out {
		if out[i].Version != i+1 {
			return nil, fmt.Errorf("migration %q: versions must be contiguous from 0001", out[i].Name)
		}
	}
	return out, nil
}

// Fingerprint identifies the exact set of embedded migrations (test templates are keyed by it).
func Fingerprint() (string, error) {
	ms, err := All()
	if err != nil {
		return "", err
	}
	h := sha256.New()
	for _, m := range ms {
		fmt.Fprintf(h, "%s\x00%s\x00", m.Name, m.SQL)
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

// Latest is the highest embedded version.
func Latest() (int, error) {
	ms, err := All()
	if err != nil {
		return 0, err
	}
	return len(ms), nil
}

// Up applies every migration not yet recorded in schema_migrations. Each step is one
// transaction that first takes the transaction-level advisory lock, so concurrent runs
// serialize step by step and no lock outlives its transaction: safe with several instances
// and behind a transaction-pooling PgBouncer (a session-level lock could be taken and
// released on different server connections there).
func Up(ctx context.Context, pool *pgxpool.Pool) error {
	ms, err := All()
	if err != nil {
		return err
	}
	step := func(fn func(pgx.Tx) error) error {
		return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, lockID); err != nil {
				return fmt.Errorf("migrate: lock: %w", err)
			}
			return fn(tx)
		})
	}
	if err := step(func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`)
		return err
	}); err != nil {
		return fmt.Errorf("migrate: bookkeeping table: %w", err)
	}
	for _, m := range ms {
		err := step(func(tx pgx.Tx) error {
			var done bool
			if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM schema_migrations WHERE version = $1)`, m.Version).Scan(&done); err != nil {
				return err
			}
			if done {
				return nil
			}
			if _, err := tx.Exec(ctx, m.SQL); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, `INSERT INTO schema_migrations (version, name) VALUES ($1, $2)`, m.Version, m.Name)
			return err
		})
		if err != nil {
			return fmt.Errorf("migrate: %s: %w", m.Name, err)
		}
	}
	return nil
}

// Current reports the highest applied version (0 when none), for /readyz.
func Current(ctx context.Context, pool *pgxpool.Pool) (int, error) {
	var v int
	err := pool.QueryRow(ctx, `SELECT COALESCE(max(version), 0) FROM schema_migrations`).Scan(&v)
	return v, err
}

// Ahead reports a schema newer than this binary (a newer binary migrated the database, and
// this older one started on it): the highest applied version and the highest embedded one,
// and whether the first is greater. Up leaves such a schema as it is, and /readyz (store
// Ready) answers 503 until a binary that knows it runs.
func Ahead(ctx context.Context, pool *pgxpool.Pool) (applied, known int, ahead bool, err error) {
	if applied, err = Current(ctx, pool); err != nil {
		return 0, 0, false, err
	}
	if known, err = Latest(); err != nil {
		return 0, 0, false, err
	}
	return applied, known, applied > known, nil
}
