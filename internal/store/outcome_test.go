package store

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// classify's table (SPEC §12): what each kind of failure tells the caller.
func TestClassify(t *testing.T) {
	t.Parallel()
	pg := func(code string) error { return &pgconn.PgError{Severity: "ERROR", Code: code} }
	for _, c := range []struct {
		what       string
		err        error
		commitSent bool
		want       error // nil: left as it is (a certain rollback the server answered)
	}{
		{"disk full", pg("53100"), false, ErrUnavailable},
		{"disk full at commit (the server answered)", pg("53100"), true, ErrUnavailable},
		{"out of memory", pg("53200"), false, ErrUnavailable},
		{"too many connections", pg("53300"), false, ErrUnavailable},
		{"serialization failure", pg("40001"), true, ErrTransient},
		{"cancelled by an operator", pg("57014"), false, ErrTransient},
		{"a read-only database (a standby, a failover)", pg("25006"), false, ErrUnavailable},
		{"a read-only database at commit (the server answered)", pg("25006"), true, ErrUnavailable},
		{"unique violation", pg("23505"), true, nil},
		{"call bound expired before commit", context.DeadlineExceeded, false, ErrUnavailable},
		{"call bound expired during commit", context.DeadlineExceeded, true, ErrOutcomeUnknown},
		{"administrator shutdown during commit", &pgconn.PgError{Severity: "FATAL", Code: "57P01"}, true, ErrOutcomeUnknown},
	} {
		got := classify(c.err, c.commitSent)
		for _, outcome := range []error{ErrUnavailable, ErrTransient, ErrOutcomeUnknown} {
			if errors.Is(got, outcome) != (outcome == c.want) {
				t.Errorf("%s: classify = %v, want outcome %v", c.what, got, c.want)
			}
		}
		if !errors.Is(got, c.err) {
			t.Errorf("%s: the cause is lost: %v", c.what, got)
		}
	}
}
