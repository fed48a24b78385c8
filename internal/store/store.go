// Package store is the only user of the sqlc-generated queries (gen/db). It owns the
// connection pool and transactions and converts rows into the plain types below; the
// service never sees a gen/db type or writes SQL.
package store

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentbox/agentbox/gen/db"
	"github.com/agentbox/agentbox/internal/migrate"
)

// ErrNotFound is returned when a single-row query finds nothing.
var ErrNotFound = errors.New("store: not found")

// DefaultMaxConns is the pool size unless the database URL sets pool_max_conns.
const DefaultMaxConns = 32

// CallTimeout bounds the database work of one call (a transaction, or a lookup outside one)
// whose context has no deadline of its own. A database that hangs rather than fails (a
// stopped postmaster, a stalled disk) never breaks the connection, so without a bound a call
// would wait, holding its pooled connection, for as long as the database hangs, and so would
// the server's shutdown. An expired bound ends the call as a lost connection does (classify):
// TEMPORARILY_UNAVAILABLE, or outcome_unknown when COMMIT was in flight. Callers that
// legitimately run longer (a retroactive cleanup) set their own deadline.
const CallTimeout = 30 * time.Second

// rollbackTimeout bounds a rollback sent after the call's own context ended.
const rollbackTimeout = 5 * time.Second

// ReadyTimeout bounds the readiness check, which a probe expects answered in seconds.
const ReadyTimeout = 5 * time.Second

// bounded is ctx with the store's call timeout unless it already has a deadline.
func (s *Store) bounded(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, s.callTimeout)
}

// SetCallTimeout replaces CallTimeout for this store (fault tests use a short one).
func (s *Store) SetCallTimeout(d time.Duration) { s.callTimeout = d }

// Store is the database handle.
type Store struct {
	pool        *pgxpool.Pool
	cursorKey   []byte
	callTimeout time.Duration
	expiry      expirySweeper // idempotency_expiry.go
}

// Open connects, applies migrations (advisory-locked, safe with several instances) and returns the store.
func Open(ctx context.Context, url string) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("store: database URL: %w", err)
	}
	// pgxpool's default (max(4, cores)) starves a server whose requests each hold a
	// connection for one short transaction; pool_max_conns in the URL overrides this.
	if !strings.Contains(url, "pool_max_conns") {
		cfg.MaxConns = DefaultMaxConns
	}
	cfg.AfterConnect = prepareConn
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("store: connect: %w", err)
	}
	// Reached once, with a bound, before anything else: a database that is down or hangs at
	// start is said so plainly (migrate's own failure would name its bookkeeping table). The
	// server does not wait for it: a supervisor, or the user, starts it again.
	reach, cancel := context.WithTimeout(ctx, CallTimeout)
	err = pool.Ping(reach)
	cancel()
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("cannot reach the database; start PostgreSQL (or fix the database URL) and start agentbox again: %w",
			withoutPassword{err, passwordPieces(url)})
	}
	if err := migrate.Up(ctx, pool); err != nil {
		pool.Close()
		return nil, err
	}
	s := &Store{pool: pool, callTimeout: CallTimeout}
	// Loaded once at start: a request never needs a second connection to sign a cursor.
	if s.cursorKey, err = s.ServerSecret(ctx, "cursor_mac"); err != nil {
		pool.Close()
		return nil, fmt.Errorf("store: cursor key: %w", err)
	}
	return s, nil
}

// prepareConn sets up each new pooled connection.
func prepareConn(_ context.Context, conn *pgx.Conn) error {
	registerUUID(conn.TypeMap())
	return nil
}

// CursorKey is the MAC key for pagination cursors, shared by every server process on this database.
func (s *Store) CursorKey() []byte { return s.cursorKey }

// Close releases the pool.
func (s *Store) Close() { s.pool.Close() }

// CloseWithin closes the pool but waits at most d for it, and reports whether it finished.
// Closing a connection to a database that hangs (a stopped postmaster) waits for the cancel
// request pgx sends it, up to 15 s per connection (pgconn's asyncClose); a server that is
// stopping need not wait for that: its sockets close with the process.
func (s *Store) CloseWithin(d time.Duration) bool {
	closed := make(chan struct{})
	go func() {
		s.pool.Close()
		close(closed)
	}()
	select {
	case <-closed:
		return true
	case <-time.After(d):
		return false
	}
}

// Pool exposes the pool for health checks and benchmarks; queries go through Tx.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Ready reports whether the database answers and every embedded migration is applied. A
// pooled connection the database closed is no outage: the pool starts afresh and the check
// runs once more (as InTx does), so /readyz does not flap after a database restart.
func (s *Store) Ready(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, ReadyTimeout)
	defer cancel()
	err := s.ready(ctx)
	if err != nil && connectionLost(err) && ctx.Err() == nil {
		s.pool.Reset()
		err = s.ready(ctx)
	}
	return err
}

func (s *Store) ready(ctx context.Context) error {
	cur, err := migrate.Current(ctx, s.pool)
	if err != nil {
		return err
	}
	want, err := migrate.Latest()
	if err != nil {
		return err
	}
	if cur != want {
		return fmt.Errorf("store: schema at version %d, binary expects %d", cur, want)
	}
	// A database that takes no writes (a hot standby, a primary set read-only for a failover)
	// cannot serve this instance's calls: every mutation writes, and so do the reads that
	// record receipts; a load balancer should send them elsewhere.
	var readOnly bool
	if err := s.pool.QueryRow(ctx, `SELECT pg_is_in_recovery() OR current_setting('default_transaction_read_only')::boolean`).Scan(&readOnly); err != nil {
		return err
	}
	if readOnly {
		return errors.New("store: the database takes no writes (read-only, or a standby)")
	}
	return nil
}

// Tx is one database transaction with the typed queries.
type Tx struct {
	c *txConn
	q *db.Queries
}

// InTx runs fn in a READ COMMITTED transaction and commits when fn returns nil. BEGIN travels
// with the transaction's first statement and COMMIT with its last ones (see Tx.pipeline and
// Tx.PutIdempotencyRecord), so neither costs a round trip of its own.
func (s *Store) InTx(ctx context.Context, fn func(*Tx) error) error {
	ctx, cancel := s.bounded(ctx)
	defer cancel()
	err, deadConnection := s.inTx(ctx, fn, true)
	if deadConnection {
		// The pooled connection was dead before the server answered anything (the database
		// restarted, or closed idle sessions): nothing of the transaction ran, and the pool's
		// other idle connections are likely dead too. Start them afresh and run it once more,
		// instead of failing one call per dead connection.
		s.pool.Reset()
		err, _ = s.inTx(ctx, fn, false)
	}
	return err
}

// inTx is one attempt of InTx. deadConnection reports a failure of the transaction's very
// first round trip on a lost connection, while the call's bound holds: no statement ran, and
// the credential check that rode in the round trip is pending again.
func (s *Store) inTx(ctx context.Context, fn func(*Tx) error, mayRetry bool) (_ error, deadConnection bool) {
	pc, err := s.pool.Acquire(ctx)
	if err != nil {
		err = classify(err, false)
		settleUnreadCheck(pendingKeyCheck(ctx), err)
		return err, false
	}
	// fn's statements run under the contexts fn passes, the caller's; the bound is enforced
	// on the connection instead: when it ends, the connection is closed under whatever
	// statement waits, which then fails as a lost connection (classify), and the pool drops it.
	bounded := make(chan struct{})
	unwatch := context.AfterFunc(ctx, func() {
		pc.Conn().PgConn().Conn().Close() //nolint:errcheck // closing is the point
		close(bounded)
	})
	defer func() {
		if !unwatch() { // the bound (or the caller) ended the call: pgx must know the connection is gone
			<-bounded
			pc.Conn().PgConn().Close(context.Background()) //nolint:errcheck // already closed underneath
		}
		// A connection released inside a transaction (a panic, a failed rollback) is closed
		// by the pool, which aborts the transaction.
		pc.Release()
	}()
	check := pendingKeyCheck(ctx)
	c := &txConn{conn: pc.Conn(), check: check}
	if err := fn(&Tx{c: c, q: db.New(c)}); err != nil {
		c.rollback(ctx)
		if mayRetry && !c.answered && connectionLost(err) && ctx.Err() == nil {
			if check != nil {
				check.ran, check.err = false, nil // it read nothing: the connection was dead
			}
			return classify(err, false), true
		}
		err = classify(err, false)
		settleUnreadCheck(c.check, err)
		return err, false
	}
	// Every failure of the COMMIT round trip that is not the server's own answer leaves the
	// outcome unknown (classify).
	return classify(c.commit(ctx), true), false
}

// txConn is a connection with a transaction that begins at its first statement.
type txConn struct {
	conn  *pgx.Conn
	begun bool
	// atCommit are the transaction's last statements, sent in the COMMIT's round trip.
	atCommit []step
	// queued ride behind the statements of the next round trip (pipeline.go).
	queued []*queued
	// check is the call's credential check, sent first in the transaction's first round
	// trip; limit is the rate-limit token it asked for (keycheck.go).
	check      *KeyCheck
	limit      *RateLimit
	savepoints int
	// answered: the server has answered a round trip of this transaction (InTx retries a
	// transaction whose very first round trip found its pooled connection dead).
	answered bool
}

// The db.DBTX methods: the transaction's first statement is sent behind its BEGIN, in the
// same round trip.

func (c *txConn) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if c.begun {
		return c.conn.Exec(ctx, sql, args...)
	}
	res, err := c.beginWith(ctx, sql, args)
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	tag, err := res.Exec()
	if cerr := res.Close(); err == nil {
		err = cerr
	}
	return tag, err
}

func (c *txConn) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if c.begun {
		return c.conn.Query(ctx, sql, args...)
	}
	res, err := c.beginWith(ctx, sql, args)
	if err != nil {
		return nil, err
	}
	rows, err := res.Query()
	if err != nil {
		res.Close()
		return nil, err
	}
	return &batchRows{Rows: rows, res: res}, nil
}

func (c *txConn) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if c.begun {
		return c.conn.QueryRow(ctx, sql, args...)
	}
	res, err := c.beginWith(ctx, sql, args)
	if err != nil {
		return errRow{err}
	}
	return batchRow{row: res.QueryRow(), res: res}
}

// beginWith sends BEGIN and one statement, and reads BEGIN's result. A pending credential
// check goes first, in a round trip of its own (a call whose first statement is not
// pipelined).
func (c *txConn) beginWith(ctx context.Context, sql string, args []any) (pgx.BatchResults, error) {
	if c.check != nil {
		if _, err := c.send(ctx, nil, false); err != nil {
			return nil, err
		}
		return c.conn.SendBatch(ctx, singleBatch(sql, args)), nil
	}
	c.begun = true
	b := &pgx.Batch{}
	b.Queue("begin")
	b.Queue(sql, args...)
	res := c.conn.SendBatch(ctx, b)
	if _, err := res.Exec(); err != nil {
		res.Close()
		return nil, err
	}
	c.answered = true
	return res, nil
}

func singleBatch(sql string, args []any) *pgx.Batch {
	b := &pgx.Batch{}
	b.Queue(sql, args...)
	return b
}

// batchRow and batchRows end their batch when the caller is done with the statement's result.
type batchRow struct {
	row pgx.Row
	res pgx.BatchResults
}

func (r batchRow) Scan(dest ...any) error {
	err := r.row.Scan(dest...)
	if cerr := r.res.Close(); err == nil {
		err = cerr
	}
	return err
}

type batchRows struct {
	pgx.Rows
	res pgx.BatchResults
}

func (r *batchRows) Close() {
	r.Rows.Close()
	r.res.Close()
}

type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

// commit sends the queued last statements and COMMIT in one round trip. A transaction that
// never ran a statement has nothing to commit.
func (c *txConn) commit(ctx context.Context) error {
	if !c.begun && len(c.atCommit) == 0 {
		return nil
	}
	steps := c.atCommit
	c.atCommit = nil
	tag, err := c.send(ctx, steps, true)
	if err == nil && tag.String() == "ROLLBACK" { // the server had aborted the transaction
		err = pgx.ErrTxCommitRollback
	}
	if err != nil {
		c.rollback(ctx)
	}
	return err
}

// rollback ends a begun transaction; on failure the pool closes the connection.
func (c *txConn) rollback(ctx context.Context) {
	if c.begun {
		// Not cancelled with the call (a rollback is owed even when the call was cancelled),
		// but bounded: a connection whose rollback does not finish is closed by the pool.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackTimeout)
		defer cancel()
		c.conn.Exec(ctx, "rollback") //nolint:errcheck // see above
	}
}

// one maps pgx.ErrNoRows to ErrNotFound.
func one[T any](v T, err error) (T, error) {
	if errors.Is(err, pgx.ErrNoRows) {
		return v, ErrNotFound
	}
	return v, err
}

// ServerSecret returns the named secret shared by all server processes, creating it once.
func (s *Store) ServerSecret(ctx context.Context, name string) ([]byte, error) {
	ctx, cancel := s.bounded(ctx)
	defer cancel()
	q := db.New(s.pool)
	fresh := make([]byte, 32)
	if _, err := rand.Read(fresh); err != nil {
		return nil, err
	}
	if err := q.EnsureServerSecret(ctx, db.EnsureServerSecretParams{Name: name, Secret: fresh}); err != nil {
		return nil, err
	}
	return q.GetServerSecret(ctx, name)
}

// withoutPassword is err with every piece of the URL's password masked in its text. A password
// with an unencoded '@' or '#' is read by the URL parser as part of the host, which the
// connection error then quotes ("lookup SECRET@host: no such host").
type withoutPassword struct {
	err    error
	pieces []string
}

func (w withoutPassword) Error() string {
	msg := w.err.Error()
	for _, p := range w.pieces {
		msg = strings.ReplaceAll(msg, p, "xxxxx")
	}
	return msg
}

func (w withoutPassword) Unwrap() error { return w.err }

// passwordPieces are the parts of a postgres:// URL's password as its writer meant it: the
// userinfo runs to the last '@' of the authority, the password from its first ':'. Pieces are
// split where a parser may cut the URL ('@', '#', '/', '?', ':'); one-character pieces are
// left alone (masking them would mangle the message). Nil for a keyword/value string.
func passwordPieces(url string) []string {
	_, rest, ok := strings.Cut(url, "://")
	if !ok {
		return nil
	}
	at := strings.LastIndex(rest, "@")
	if at < 0 {
		return nil
	}
	_, password, ok := strings.Cut(rest[:at], ":")
	if !ok {
		return nil
	}
	var pieces []string
	for _, p := range strings.FieldsFunc(password, func(r rune) bool { return strings.ContainsRune("@#/?:", r) }) {
		if len(p) > 1 {
			pieces = append(pieces, p)
		}
	}
	return pieces
}
