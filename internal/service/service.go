// Package service implements every operation once, as the oapi-codegen strict server
// interface; the HTTP and MCP transports both call it. Each call runs the same pipeline:
// session → rules → store → build response → validate against the output schema →
// idempotency record → commit (SPEC §1).
package service

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"log/slog"
	"strconv"
	"time"

	"github.com/agentbox/agentbox/gen/api"
	"github.com/agentbox/agentbox/gen/mcp"
	"github.com/agentbox/agentbox/internal/apierr"
	"github.com/agentbox/agentbox/internal/auth"
	"github.com/agentbox/agentbox/internal/clock"
	"github.com/agentbox/agentbox/internal/cursor"
	"github.com/agentbox/agentbox/internal/store"
)

var _ api.StrictServerInterface = (*Service)(nil)

// Options configure a Service.
type Options struct {
	Store *store.Store
	Clock clock.Clock // nil: the system clock
	Log   *slog.Logger
	// TamperResponse, when set, rewrites a response body just before output validation.
	// Tests use it to prove that a contract-breaking response rolls its mutation back.
	TamperResponse func(operationID string, body []byte) []byte
}

// Service implements api.StrictServerInterface.
type Service struct {
	store  *store.Store
	clock  clock.Clock
	log    *slog.Logger
	tamper func(string, []byte) []byte

	cursors *cursor.Codec
}

// New builds the service.
func New(o Options) *Service {
	if o.Clock == nil {
		o.Clock = clock.System{}
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	return &Service{store: o.Store, clock: o.Clock, log: o.Log, tamper: o.TamperResponse, cursors: cursor.New(o.Store.CursorKey())}
}

// call is what every agent operation knows about its caller.
type call struct {
	p                auth.Principal
	now              time.Time
	session          store.Session
	settings         api.SettingsValues
	settingsRevision int64
	dryRun           bool // the call is a dry run: its transaction is rolled back (runMutation)
}

// errDryRun rolls a dry-run transaction back after its result was built and validated.
var errDryRun = errors.New("dry run")

// agentCall resolves the caller's primed session inside tx (NOT_PRIMED without one) and, for
// mutations, refuses to act while the session has not observed the current profile.
func (s *Service) agentCall(ctx context.Context, tx *store.Tx, mutation bool) (*call, error) {
	p, ok := auth.PrincipalFrom(ctx)
	if !ok {
		return nil, apierr.Auth()
	}
	now := s.clock.Now()
	sess, bs, err := tx.SessionByKey(ctx, p.BoxID, p.AgentID, sessionKeyHash(ctx, p), now)
	if err != nil && err != store.ErrNotFound {
		return nil, err
	}
	return newCall(p, now, sess, bs, err == nil, mutation)
}

// newCall is agentCall's rule on a session already read (primed: it exists).
func newCall(p auth.Principal, now time.Time, sess store.Session, bs store.BoxSettings, primed, mutation bool) (*call, error) {
	if !primed {
		return nil, apierr.New(apierr.NotPrimed, "this session is not primed").WithSuggestion("call agent_prime first")
	}
	if mutation && sess.ObservedProfileVersion < sess.CurrentProfileVersion {
		return nil, apierr.New(apierr.ProfileOutdated, "the private profile changed since this session read it").
			WithSuggestion("nothing was done: call profile_get, follow the new profile, then retry with the same idempotency_key (a call that already succeeded under it returns its original result)")
	}
	c := &call{p: p, now: now, session: sess, settingsRevision: bs.Revision}
	var err error
	c.settings, err = effectiveSettings(bs.Overrides)
	return c, err
}

// retained reports whether an idempotency record written at createdAt is still kept: records
// are kept for the retention in force now (SPEC §10), so one older than a lowered retention
// is gone, though its own expiry (the sweeper's) has not come yet.
func (c *call) retained(createdAt time.Time) bool {
	return !createdAt.Before(c.now.Add(-time.Duration(c.settings.IdempotencyRetentionSeconds) * time.Second))
}

func errIdempotencyConflict() error {
	return apierr.New(apierr.IdempotencyConflict, "this idempotency_key was used with different arguments").
		WithField("idempotency_key").WithSuggestion("use a new idempotency_key for a new action")
}

// dryRunKeyCheck refuses a dry run whose idempotency_key a real call already used with other
// arguments: the real call would be IDEMPOTENCY_CONFLICT, so the dry run says so (SPEC §10: it
// validates everything exactly as the real call would). It writes nothing and takes no lock.
func dryRunKeyCheck(ctx context.Context, tx *store.Tx, c *call, m mutation) error {
	argHash, err := hashArgs(m.args)
	if err != nil {
		return err
	}
	scope := store.IdempotencyScope{BoxID: c.p.BoxID, AgentID: c.p.AgentID, Tool: m.op, Key: m.idempotencyKey}
	found, hash, createdAt, err := tx.IdempotencyRecord(ctx, scope, c.now)
	if err != nil {
		return err
	}
	if found && c.retained(createdAt) && !bytes.Equal(hash, argHash) {
		return errIdempotencyConflict()
	}
	return nil
}

// withSettingsRevision gives a LIMIT_EXCEEDED the revision of the settings its limit was
// read from (SPEC §11: settings_revision "increments on every settings change; compare it to
// detect new limits"), so a caller can tell whether the limits it holds are still current.
func withSettingsRevision(err error, c *call) error {
	if e, ok := apierr.As(err); ok && e.Code == apierr.LimitExceeded && e.SettingsRevision == nil {
		e.WithSettingsRevision(c.settingsRevision)
	}
	return err
}

// sessionKeyHash is the stored form of the transport's session key (SPEC §3 rule in auth.SessionKey).
func sessionKeyHash(ctx context.Context, p auth.Principal) []byte {
	key := auth.SessionKeyFrom(ctx)
	if key == "" {
		key = auth.SessionKey("", "", p.KeyID)
	}
	sum := sha256.Sum256([]byte(key))
	return sum[:]
}

// runRead runs a read that needs a primed session. Like every agent operation's runner it
// returns the validated body itself (mcp.Encoded), which the transports send as it is.
func runRead[T any](ctx context.Context, s *Service, op string, fn func(context.Context, *store.Tx, *call) (T, error)) (mcp.Encoded, error) {
	var out mcp.Encoded
	err := s.store.InTx(ctx, func(tx *store.Tx) error {
		c, err := s.agentCall(ctx, tx, false)
		if err != nil {
			return err
		}
		res, err := fn(ctx, tx, c)
		if err != nil {
			return withSettingsRevision(err, c)
		}
		out, err = outputBytes(s, op, res)
		return err
	})
	if err != nil {
		return nil, s.wireError(ctx, op, err)
	}
	return out, nil
}

// mutation describes one agent mutation for runMutation.
type mutation struct {
	op             string
	idempotencyKey string
	args           any  // everything that identifies the action, hashed for IDEMPOTENCY_CONFLICT
	dryRun         bool // validate and build the result, write nothing, record no idempotency entry
	// queue, when set, queues statements the action will need (store.Tx.QueueRoomForSend…)
	// to ride in the round trip that opens the mutation, behind its session and idempotency
	// statements, instead of costing a round trip of their own. They run even when the call
	// then fails its session or idempotency checks (and are rolled back with it).
	queue func(ctx context.Context, tx *store.Tx, p auth.Principal, now time.Time)
	// record and replay, when set, keep something other than the response as the idempotency
	// record and rebuild the replayed result from it (inbox_claim: its rows' keys, not the
	// message content a replay must not show once the caller may no longer read it). record
	// runs after the action succeeded; the replay's result is validated as a response is.
	record func() ([]byte, error)
	replay func(ctx context.Context, tx *store.Tx, c *call, record []byte) (any, error)
}

// runMutation runs an agent mutation: fresh profile, idempotency (replay returns the original
// body, or what m.replay rebuilds from m.record; other arguments under the same key are
// IDEMPOTENCY_CONFLICT), output validation before commit, and the idempotency record in the
// same transaction.
func runMutation[T any](ctx context.Context, s *Service, m mutation, fn func(context.Context, *store.Tx, *call) (T, error)) (mcp.Encoded, error) {
	var out mcp.Encoded
	err := s.store.InTx(ctx, func(tx *store.Tx) error {
		if m.dryRun {
			c, err := s.agentCall(ctx, tx, true)
			if err != nil {
				return err
			}
			if err := dryRunKeyCheck(ctx, tx, c, m); err != nil {
				return err
			}
			c.dryRun = true
			res, err := fn(ctx, tx, c)
			if err != nil {
				return withSettingsRevision(err, c)
			}
			if out, err = outputBytes(s, m.op, res); err != nil {
				return err
			}
			return errDryRun
		}
		p, ok := auth.PrincipalFrom(ctx)
		if !ok {
			return apierr.Auth()
		}
		argHash, err := hashArgs(m.args)
		if err != nil {
			return err
		}
		// The session, the idempotency lock and then the record, in one round trip.
		now := s.clock.Now()
		scope := store.IdempotencyScope{BoxID: p.BoxID, AgentID: p.AgentID, Tool: m.op, Key: m.idempotencyKey}
		if m.queue != nil {
			m.queue(ctx, tx, p, now)
		}
		st, err := tx.StartMutation(ctx, p.BoxID, p.AgentID, sessionKeyHash(ctx, p), scope, now)
		if err != nil {
			return err
		}
		c, err := newCall(p, now, st.Session, st.Box, st.Primed, true)
		if err != nil {
			return err
		}
		if st.Found && !c.retained(st.RecordCreatedAt) {
			st.Found = false
		}
		switch {
		case st.Found && !bytes.Equal(st.RecordHash, argHash):
			return errIdempotencyConflict()
		case st.Found && m.replay != nil:
			res, err := m.replay(ctx, tx, c, st.RecordResponse)
			if err != nil {
				return err
			}
			out, err = outputBytes(s, m.op, res)
			return err
		case st.Found: // the replay is the recorded body, byte for byte
			out = st.RecordResponse
			return nil
		}
		res, err := fn(ctx, tx, c)
		if err != nil {
			return withSettingsRevision(err, c)
		}
		body, err := outputBytes(s, m.op, res)
		if err != nil {
			return err
		}
		record := []byte(body)
		if m.record != nil {
			if record, err = m.record(); err != nil {
				return err
			}
		}
		retention := time.Duration(c.settings.IdempotencyRetentionSeconds) * time.Second
		if err := tx.PutIdempotencyRecord(ctx, scope, argHash, record, c.now, c.now.Add(retention)); err != nil {
			return err
		}
		out = body
		return nil
	})
	if err != nil && !errors.Is(err, errDryRun) {
		return nil, s.wireError(ctx, m.op, err)
	}
	return out, nil
}

// runAdmin runs an admin operation (the transport has authenticated the admin token).
func runAdmin[T any](ctx context.Context, s *Service, op string, fn func(context.Context, *store.Tx, time.Time) (T, error)) (T, error) {
	var out T
	err := s.store.InTx(ctx, func(tx *store.Tx) error {
		res, err := fn(ctx, tx, s.clock.Now())
		if err != nil {
			return err
		}
		out, err = checkOutput(s, op, res)
		return err
	})
	err = s.wireError(ctx, op, err)
	if e, ok := apierr.As(err); ok && e.Reason == "outcome_unknown" {
		// Admin calls take no idempotency_key: the agent calls' advice (retry with the same
		// key) cannot hold, and a blind retry of a create makes a second one (a second live
		// key nobody was shown, say).
		unknown := *e
		unknown.SuggestedAction = "admin calls take no idempotency_key: read or list what this call writes to see whether it was applied before repeating it"
		err = &unknown
	}
	return out, err
}

// encodedResult is a response already encoded as compactJSON encodes it (claimPage): outputBytes
// validates it as it stands rather than encoding it again.
type encodedResult []byte

// outputBytes serializes a response and validates it against the operation's strict output
// schema. A violation is a server bug: it becomes STORAGE_FAILURE and the transaction rolls back.
func outputBytes(s *Service, op string, res any) (mcp.Encoded, error) {
	// Without HTML escaping, as MCP messages are written: a body's "<", ">" and "&" read the
	// same over HTTP and in the MCP text mirror an agent reads.
	var body []byte
	if e, ok := res.(encodedResult); ok {
		body = e
	} else {
		var err error
		if body, err = compactJSON(res); err != nil {
			return nil, err
		}
	}
	if s.tamper != nil {
		body = s.tamper(op, body)
	}
	o, ok := mcp.Operations[op]
	if !ok {
		return nil, errors.New("service: unknown operation " + op)
	}
	if v := o.Output.ValidateJSON(body); v != nil {
		s.log.Error("response violates its output schema; rolled back", slog.String("op", op), slog.String("field", v.Field), slog.String("keyword", v.Keyword))
		return nil, apierr.Storage()
	}
	return body, nil
}

// checkOutput validates res and returns the value the caller receives (decoded from the validated bytes).
func checkOutput[T any](s *Service, op string, res T) (T, error) {
	var out T
	body, err := outputBytes(s, op, res)
	if err != nil {
		return out, err
	}
	err = json.Unmarshal(body, &out)
	return out, err
}

// hashArgs is the identity of a mutation's arguments: SHA-256 of their canonical JSON
// (object keys sorted, idempotency_key excluded by the caller). Semantically identical
// arguments must hash alike (SPEC §10), so each caller first writes what is said two ways
// one way: an empty optional list as absent (emptyAsAbsent), a default as absent, a
// collapsed repetition once.
func hashArgs(args any) ([]byte, error) {
	raw, err := json.Marshal(args)
	if err != nil {
		return nil, err
	}
	canon, err := canonicalJSON(raw) // what decoding raw into `any` and marshalling it gives
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(canon)
	return sum[:], nil
}

// wireError turns any failure into an *apierr.Error. Unexpected failures are logged with
// their cause and reported without it.
func (s *Service) wireError(ctx context.Context, op string, err error) error {
	if err == nil {
		return nil
	}
	if e, ok := apierr.As(err); ok {
		return e
	}
	if e := storageOutcome(err); e != nil {
		s.log.WarnContext(ctx, "storage unavailable", slog.String("op", op), slog.String("reason", e.Reason), slog.Any("err", err))
		return e
	}
	s.log.ErrorContext(ctx, "storage failure", slog.String("op", op), slog.Any("err", err))
	return apierr.Storage()
}

// storageOutcome is the answer for a failure the store classified (SPEC §12): an unknown
// outcome, an unreachable database and a transient conflict are TEMPORARILY_UNAVAILABLE and
// retryable; nil for any other failure, whose rollback the server confirmed (STORAGE_FAILURE).
func storageOutcome(err error) *apierr.Error {
	switch {
	case errors.Is(err, store.ErrOutcomeUnknown):
		return apierr.OutcomeUnknown()
	case errors.Is(err, store.ErrUnavailable):
		return apierr.Unavailable()
	case errors.Is(err, store.ErrTransient):
		return apierr.New(apierr.TemporarilyUnavailable, "the database refused the transaction for a transient reason; nothing was written").
			WithReason("transient_conflict").WithSuggestion("retry shortly; a write retries with the same idempotency_key")
	}
	return nil
}

// dec formats a 64-bit value as the contract's decimal string.
func dec(v int64) string { return strconv.FormatInt(v, 10) }

// parseDec parses a decimal-string input (the schema has already checked its shape).
func parseDec(field, s string) (int64, error) {
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v < 0 {
		return 0, apierr.Invalid(field, "must be a decimal string within the signed 64-bit range")
	}
	return v, nil
}

func itoa(i int) string { return strconv.Itoa(i) }

// canonicalDec is a decimal-string input as the service reads it ("007" is 7, written "7"),
// or the input itself when it is not one (its own check refuses it). Idempotency arguments
// carry this form, so a retry that writes the same number differently replays (SPEC §10:
// "semantically identical arguments return the original result").
func canonicalDec(s string) string {
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v < 0 {
		return s
	}
	return dec(v)
}

func canonicalDecs(in []string) []string {
	out := make([]string, len(in))
	for i, s := range in {
		out[i] = canonicalDec(s)
	}
	return out
}

// emptyAsAbsent is an optional list as hashArgs sees it: an empty list says what an absent one
// says (no mentions, no files).
func emptyAsAbsent[T any](list *[]T) *[]T {
	if list != nil && len(*list) == 0 {
		return nil
	}
	return list
}

// firstOccurrences is a list with each repeated element collapsed onto its first occurrence.
func firstOccurrences[T comparable](list []T) []T {
	seen := make(map[T]bool, len(list))
	out := make([]T, 0, len(list))
	for _, v := range list {
		if !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	return out
}
