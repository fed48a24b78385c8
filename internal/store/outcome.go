package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"
)

// What a failed transaction means for the caller (SPEC §12). InTx returns every failure
// wrapped in at most one of these, so the service maps outcomes in one place:
//
//   - ErrOutcomeUnknown: the connection failed while COMMIT was in flight (sent, or being
//     sent, and not answered). The transaction may have committed; the caller must retry
//     with the same idempotency key to learn its result.
//   - ErrUnavailable: the database could not be reached or the connection was lost before
//     COMMIT was sent. The server aborts a transaction whose connection is gone, so nothing
//     was written; retrying is safe.
//   - ErrTransient: the database refused the transaction for a reason a retry resolves
//     (serialization failure, deadlock). Rolled back.
//
// Any other error is a certain rollback of a transaction the server answered.
var (
	ErrOutcomeUnknown = errors.New("store: outcome unknown: the connection failed while COMMIT was in flight")
	ErrUnavailable    = errors.New("store: database unavailable")
	ErrTransient      = errors.New("store: transient failure")
)

// classify wraps err in the outcome it implies. commitSent is true for a failure of the
// round trip that carries COMMIT.
func classify(err error, commitSent bool) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, ErrOutcomeUnknown) || errors.Is(err, ErrUnavailable) || errors.Is(err, ErrTransient) {
		return err
	}
	if connectionLost(err) {
		// pgconn marks errors that happened before any byte of the request was written.
		if commitSent && !pgconn.SafeToRetry(err) {
			return fmt.Errorf("%w: %w", ErrOutcomeUnknown, err)
		}
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case "40001", "40P01": // serialization failure, deadlock: the server rolled back
			return fmt.Errorf("%w: %w", ErrTransient, err)
		case "57014": // cancelled by an operator (pg_cancel_backend): rolled back, a retry may run
			return fmt.Errorf("%w: %w", ErrTransient, err)
		case "25006":
			// A read-only transaction (a hot standby, or a primary set read-only during a
			// failover): rolled back, and a retry succeeds once the database takes writes again.
			return fmt.Errorf("%w: %w", ErrUnavailable, err)
		case "53000", "53100", "53200", "53300", "53400":
			// Out of a resource (disk full, memory, connections, a configured limit): the
			// server rolled the transaction back, and a retry may succeed once the
			// resource is back, which a certain, final STORAGE_FAILURE would tell the client
			// not to try.
			return fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
	}
	return err
}

// connectionLost reports whether err means the connection to the database failed (or was
// never made) rather than the server answering the statement with an error.
func connectionLost(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		// FATAL and PANIC end the session (admin shutdown, crash of another backend,
		// terminated backend): the server said nothing about the transaction's outcome.
		if pgErr.Severity == "FATAL" || pgErr.Severity == "PANIC" || pgErr.SeverityUnlocalized == "FATAL" || pgErr.SeverityUnlocalized == "PANIC" {
			return true
		}
		switch {
		case strings.HasPrefix(pgErr.Code, "08"), // connection exception
			pgErr.Code == "57P01", pgErr.Code == "57P02", pgErr.Code == "57P03", // shutdown, crash, starting up
			pgErr.Code == "57P05": // idle session timeout
			return true
		}
		return false
	}
	var connectErr *pgconn.ConnectError
	var netErr net.Error
	switch {
	case errors.As(err, &connectErr),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, pgconn.ErrConnClosed), errors.Is(err, net.ErrClosed),
		errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.EPIPE),
		errors.As(err, &netErr),
		pgconn.Timeout(err),
		// A cancelled or expired context makes pgx abandon (close) the connection mid-request.
		errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return true
	}
	return false
}
