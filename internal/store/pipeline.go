package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/agentbox/agentbox/gen/db"
)

// Pipelining: several generated queries sent in one round trip, still as separate
// statements. Under READ COMMITTED each statement takes its snapshot when it starts, after the
// previous one finished, so a read queued behind a lock sees everything committed before the
// lock was granted — what sending them one by one guarantees, without the waits. (Merging
// such a read into the locking statement would not: its snapshot predates the wait.) The
// transaction's BEGIN rides with its first pipeline and its COMMIT with the last statements.

// step is one call of one generated query. A pipeline runs it twice: first against a
// recorder that captures its SQL and arguments (the result, errQueued, is discarded), then
// against the pipeline's results. A step assigns its outputs and returns only unexpected
// errors ("no row" is an answer: see notFoundIsNil).
type step func(q *db.Queries) error

// errQueued is what a step sees while its statement is being recorded.
var errQueued = errors.New("store: statement queued for a pipeline")

// pipeline sends the steps' statements in order in one round trip and hands each step its
// result. It returns the first error (a failed statement aborts the rest).
func (t *Tx) pipeline(ctx context.Context, steps ...step) error {
	_, err := t.c.send(ctx, steps, false)
	return err
}

// Queued statements: a caller that will need statements whose arguments it already knows can
// queue them (Tx.queue) to ride behind the transaction's next round trip instead of costing
// one of their own; it collects their results afterwards through the queued value, which
// sends them itself if no round trip took them (queued.run). A send's channel lock and the
// reads after it ride this way in the round trip that opens the mutation (session,
// idempotency lock and record: StartMutation), behind those statements, so the locks are
// still taken in the same order.

// queued is a group of steps waiting for the transaction's next round trip.
type queued struct {
	steps []step
	sent  bool  // a round trip took the steps and handed them their results
	err   error // the first error of the round trip that took them
}

// queue puts the steps behind the statements of the transaction's next round trip.
func (t *Tx) queue(steps ...step) *queued {
	q := &queued{steps: steps}
	t.c.queued = append(t.c.queued, q)
	return q
}

// run makes sure the steps have run and returns the error of the round trip that ran them.
func (q *queued) run(ctx context.Context, t *Tx) error {
	if !q.sent {
		t.c.unqueue(q)
		q.sent = true
		q.err = t.pipeline(ctx, q.steps...)
	}
	return q.err
}

func (c *txConn) unqueue(q *queued) {
	for i, w := range c.queued {
		if w == q {
			c.queued = append(c.queued[:i], c.queued[i+1:]...)
			return
		}
	}
}

// send is pipeline with the transaction's BEGIN in front when it has not begun, the queued
// steps behind the given ones and, with commit, COMMIT at the end (whose command tag it
// returns).
func (c *txConn) send(ctx context.Context, steps []step, commit bool) (pgconn.CommandTag, error) {
	if c.check != nil && commit { // the check and a token it may ask for come before COMMIT
		if _, err := c.send(ctx, nil, false); err != nil {
			return pgconn.CommandTag{}, err
		}
	}
	riding := c.queued
	c.queued = nil
	for _, q := range riding {
		steps = append(steps[:len(steps):len(steps)], q.steps...)
	}
	if k := c.check; k != nil { // the call's credential check, first (keycheck.go)
		c.check = nil
		steps = append([]step{c.checkStep(ctx, k)}, steps...)
	}
	tag, err := c.sendSteps(ctx, steps, commit)
	if err == nil && !commit {
		err = c.takeCheckToken(ctx)
	}
	for _, q := range riding {
		q.sent, q.err = true, err
	}
	return tag, err
}

func (c *txConn) sendSteps(ctx context.Context, steps []step, commit bool) (pgconn.CommandTag, error) {
	rec := &recorder{}
	recQ := db.New(rec)
	batch := &pgx.Batch{}
	begin := !c.begun
	if begin {
		batch.Queue("begin")
	}
	for i, s := range steps {
		rec.sql, rec.args = "", nil
		s(recQ) //nolint:errcheck // always errQueued: the statement is only recorded
		if rec.sql == "" {
			return pgconn.CommandTag{}, fmt.Errorf("store: pipeline step %d ran no query", i)
		}
		batch.Queue(rec.sql, rec.args...)
	}
	c.begun = true
	if commit {
		batch.Queue("commit")
	}
	res := c.conn.SendBatch(ctx, batch)
	var first error
	keep := func(err error) {
		if err != nil && first == nil {
			first = err
		}
	}
	if begin {
		_, err := res.Exec()
		keep(err)
	}
	resQ := db.New(replay{res})
	for _, s := range steps {
		keep(s(resQ))
	}
	var tag pgconn.CommandTag
	if commit {
		var err error
		tag, err = res.Exec()
		keep(err)
	}
	keep(res.Close())
	if first == nil || !connectionLost(first) {
		c.answered = true
	}
	return tag, first
}

// recorder is a db.DBTX that records one statement instead of running it.
type recorder struct {
	sql  string
	args []any
}

func (r *recorder) Exec(_ context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	r.sql, r.args = sql, args
	return pgconn.CommandTag{}, errQueued
}

func (r *recorder) Query(_ context.Context, sql string, args ...any) (pgx.Rows, error) {
	r.sql, r.args = sql, args
	return nil, errQueued
}

func (r *recorder) QueryRow(_ context.Context, sql string, args ...any) pgx.Row {
	r.sql, r.args = sql, args
	return errRow{errQueued}
}

// replay is a db.DBTX that answers each call with the next result of a sent pipeline.
type replay struct{ res pgx.BatchResults }

func (r replay) Exec(context.Context, string, ...any) (pgconn.CommandTag, error) { return r.res.Exec() }
func (r replay) Query(context.Context, string, ...any) (pgx.Rows, error)         { return r.res.Query() }
func (r replay) QueryRow(context.Context, string, ...any) pgx.Row                { return r.res.QueryRow() }
