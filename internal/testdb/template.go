package testdb

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentbox/agentbox/internal/migrate"
)

// templateLockID serializes template builds across test processes sharing a
// server ("abtdbtpl" in ASCII; distinct from migrate's lock).
const templateLockID int64 = 0x616274646274706c

func (s *server) ensureCurrentTemplate(ctx context.Context) error {
	fp, err := migrate.Fingerprint()
	if err != nil {
		return fmt.Errorf("schema fingerprint: %w", err)
	}
	s.template = "agentbox_tmpl_" + fp
	return s.ensureTemplate(ctx, s.template)
}

// ensureTemplate makes name a fully migrated template database. Only the
// final step marks it IS_TEMPLATE, so a database of that name that is not a
// template is the remnant of a build that crashed and is rebuilt.
func (s *server) ensureTemplate(ctx context.Context, name string) error {
	if ready, _, err := s.templateState(ctx, s.admin, name); err != nil || ready {
		return err
	}
	// The advisory lock is per session: hold it on a dedicated connection,
	// whose close releases it even if an unlock were never sent.
	conn, err := pgx.Connect(ctx, s.base.String())
	if err != nil {
		return fmt.Errorf("template lock connection: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, templateLockID); err != nil {
		return fmt.Errorf("template lock: %w", err)
	}
	// Another process may have built it while we waited for the lock.
	ready, exists, err := s.templateState(ctx, conn, name)
	if err != nil || ready {
		return err
	}
	return s.buildTemplate(ctx, conn, name, exists)
}

type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

func (s *server) templateState(ctx context.Context, q querier, name string) (ready, exists bool, err error) {
	err = q.QueryRow(ctx, `SELECT datistemplate FROM pg_database WHERE datname = $1`, name).Scan(&ready)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, false, nil
	}
	if err != nil {
		return false, false, fmt.Errorf("looking up template %s: %w", name, err)
	}
	return ready, true, nil
}

// buildTemplate (re)creates name, migrates it and seals it: IS_TEMPLATE marks
// it complete, ALLOW_CONNECTIONS false keeps stray sessions from blocking
// clones. Must run under the template lock.
func (s *server) buildTemplate(ctx context.Context, conn *pgx.Conn, name string, remnant bool) error {
	if remnant {
		if _, err := conn.Exec(ctx, fmt.Sprintf("DROP DATABASE %s WITH (FORCE)", ident(name))); err != nil {
			return fmt.Errorf("dropping incomplete template %s: %w", name, err)
		}
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+ident(name)); err != nil {
		return fmt.Errorf("creating template %s: %w", name, err)
	}
	if err := s.migrate(ctx, name); err != nil {
		return err
	}
	if _, err := conn.Exec(ctx, fmt.Sprintf("ALTER DATABASE %s WITH ALLOW_CONNECTIONS false IS_TEMPLATE true", ident(name))); err != nil {
		return fmt.Errorf("sealing template %s: %w", name, err)
	}
	return nil
}

func (s *server) migrate(ctx context.Context, name string) error {
	pool, err := pgxpool.New(ctx, s.urlFor(name))
	if err != nil {
		return fmt.Errorf("connecting to template %s: %w", name, err)
	}
	// Closed before sealing: clones fail while anyone is connected.
	defer pool.Close()
	if err := migrate.Up(ctx, pool); err != nil {
		return fmt.Errorf("migrating template %s: %w", name, err)
	}
	return nil
}
