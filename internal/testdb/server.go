package testdb

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentbox/agentbox/internal/pglocal"
)

const (
	localURL     = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
	probeTimeout = 2 * time.Second
	setupTimeout = 3 * time.Minute
)

// server is the PostgreSQL server this process's test databases live on.
type server struct {
	kind     string   // how it was chosen, for messages
	base     *url.URL // admin URL; urlFor swaps the database
	admin    *pgxpool.Pool
	template string

	// Set only for a throwaway cluster started by this process.
	cluster *pglocal.Cluster
	dir     string
	reaper  *reaper
}

// setup chooses the server and makes sure the template exists on it.
func setup() (*server, error) {
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	s, err := chooseServer(ctx)
	if err != nil {
		return nil, err
	}
	if err := s.open(ctx); err != nil {
		return nil, errors.Join(err, s.shutdown())
	}
	if err := s.ensureCurrentTemplate(ctx); err != nil {
		return nil, errors.Join(err, s.shutdown())
	}
	return s, nil
}

func chooseServer(ctx context.Context) (*server, error) {
	if u := os.Getenv(EnvURL); u != "" {
		return newServer(EnvURL, u)
	}
	why := EnvNoLocal + " is set"
	if !noLocal() {
		err := probe(ctx, localURL)
		if err == nil {
			return newServer("local server 127.0.0.1:5432", localURL)
		}
		why = fmt.Sprintf("127.0.0.1:5432 unavailable: %v", err)
	}
	return startThrowaway(ctx, why)
}

func noLocal() bool {
	v := os.Getenv(EnvNoLocal)
	return v != "" && v != "0"
}

// probe reports whether rawURL accepts a connection within probeTimeout.
func probe(ctx context.Context, rawURL string) error {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, rawURL)
	if err != nil {
		return err
	}
	return errors.Join(conn.Ping(ctx), conn.Close(ctx))
}

func newServer(kind, rawURL string) (*server, error) {
	// Errors never echo rawURL: it may carry a password.
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("%s: not a valid URL: %w", kind, errors.Unwrap(err))
	}
	if u.Scheme != "postgres" && u.Scheme != "postgresql" {
		return nil, fmt.Errorf("%s: need a postgres:// URL, got scheme %q", kind, u.Scheme)
	}
	return &server{kind: kind, base: u}, nil
}

// startThrowaway starts a private cluster in a new temporary directory,
// guarded by a reaper so it cannot outlive this process.
func startThrowaway(ctx context.Context, why string) (*server, error) {
	dir, err := os.MkdirTemp("", "agentbox-testdb-")
	if err != nil {
		return nil, fmt.Errorf("throwaway cluster: %w", err)
	}
	r, err := startReaper(dir)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("throwaway cluster: %w", err), os.RemoveAll(dir))
	}
	s := &server{kind: fmt.Sprintf("throwaway cluster in %s (%s)", dir, why), dir: dir, reaper: r}
	s.cluster, err = pglocal.Start(ctx, pglocal.Options{DataDir: dir, Fast: true})
	if err != nil {
		return nil, errors.Join(fmt.Errorf("starting a throwaway PostgreSQL cluster (%s): %w", why, err), s.shutdown())
	}
	if s.base, err = url.Parse(s.cluster.URL("postgres")); err != nil {
		return nil, errors.Join(fmt.Errorf("throwaway cluster URL: %w", err), s.shutdown())
	}
	return s, nil
}

// open connects the admin pool (CREATE/DROP DATABASE run there).
func (s *server) open(ctx context.Context) error {
	pool, err := pgxpool.New(ctx, s.base.String())
	if err != nil {
		return fmt.Errorf("%s: %w", s.kind, err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return fmt.Errorf("%s: %w", s.kind, err)
	}
	s.admin = pool
	return nil
}

// urlFor is the admin URL pointing at database name instead.
func (s *server) urlFor(name string) string {
	u := *s.base
	u.Path, u.RawPath = "/"+name, ""
	return u.String()
}

// shutdown releases what this process holds: the admin pool, and the
// throwaway cluster and its directory. If stopping the cluster fails, the
// directory is left to the reaper, which then stops the server itself.
func (s *server) shutdown() error {
	if s.admin != nil {
		s.admin.Close()
	}
	var errs []error
	stopped := true
	if s.cluster != nil {
		if err := s.cluster.Stop(); err != nil {
			errs = append(errs, err)
			stopped = false
		}
	}
	if s.dir != "" && stopped {
		errs = append(errs, os.RemoveAll(s.dir))
	}
	if s.reaper != nil {
		errs = append(errs, s.reaper.release())
	}
	return errors.Join(errs...)
}
