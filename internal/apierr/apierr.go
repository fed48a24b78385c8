// Package apierr is the error model of SPEC §12: one structured error for every expected
// failure, the same object over HTTP (with a status code) and MCP (structuredContent.error).
// Messages are written by us and never contain the rejected value, SQL or stack traces.
package apierr

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/agentbox/agentbox/gen/api"
)

// Code is the UPPER_CASE error class. The values are the ErrorCode enum of
// spec/openapi.json as generated into gen/api (the one list of codes); Codes lists them
// and a test checks it against the contract both ways.
type Code string

const (
	AuthFailed             = Code(api.ErrorCodeAUTHFAILED)
	NotPrimed              = Code(api.ErrorCodeNOTPRIMED)
	ProfileOutdated        = Code(api.ErrorCodePROFILEOUTDATED)
	NotFoundOrForbidden    = Code(api.ErrorCodeNOTFOUNDORFORBIDDEN)
	RoomArchived           = Code(api.ErrorCodeROOMARCHIVED)
	InvalidArgument        = Code(api.ErrorCodeINVALIDARGUMENT)
	LimitExceeded          = Code(api.ErrorCodeLIMITEXCEEDED)
	RevisionConflict       = Code(api.ErrorCodeREVISIONCONFLICT)
	IdempotencyConflict    = Code(api.ErrorCodeIDEMPOTENCYCONFLICT)
	CursorInvalid          = Code(api.ErrorCodeCURSORINVALID)
	RateLimited            = Code(api.ErrorCodeRATELIMITED)
	TemporarilyUnavailable = Code(api.ErrorCodeTEMPORARILYUNAVAILABLE)
	StorageFailure         = Code(api.ErrorCodeSTORAGEFAILURE)
)

// Codes are every code, each with its HTTP status below.
var Codes = []Code{AuthFailed, NotPrimed, ProfileOutdated, NotFoundOrForbidden, RoomArchived, InvalidArgument,
	LimitExceeded, RevisionConflict, IdempotencyConflict, CursorInvalid, RateLimited, TemporarilyUnavailable, StorageFailure}

// HTTPStatus maps a code to its HTTP status (documented per operation in spec/openapi.json).
func (c Code) HTTPStatus() int {
	switch c {
	case AuthFailed:
		return http.StatusUnauthorized
	case NotFoundOrForbidden:
		return http.StatusNotFound
	case InvalidArgument, CursorInvalid:
		return http.StatusBadRequest
	case LimitExceeded:
		return http.StatusUnprocessableEntity
	case NotPrimed, ProfileOutdated, RoomArchived, RevisionConflict, IdempotencyConflict:
		return http.StatusConflict
	case RateLimited:
		return http.StatusTooManyRequests
	case TemporarilyUnavailable:
		return http.StatusServiceUnavailable
	default: // StorageFailure
		return http.StatusInternalServerError
	}
}

// Retryable: only these two classes may be retried as-is (with the same idempotency key).
func (c Code) Retryable() bool { return c == RateLimited || c == TemporarilyUnavailable }

// Error is the structured error. Its JSON form is the ErrorDetail schema.
type Error struct {
	Code              Code    `json:"code"`
	Message           string  `json:"message"`
	Retryable         bool    `json:"retryable"`
	Reason            string  `json:"reason,omitempty"`
	Field             string  `json:"field,omitempty"`
	Limit             *int64  `json:"limit,omitempty"`
	SettingsRevision  *string `json:"settings_revision,omitempty"`
	CurrentRevision   *string `json:"current_revision,omitempty"`
	RetryAfterSeconds *int    `json:"retry_after_seconds,omitempty"`
	SuggestedAction   string  `json:"suggested_action,omitempty"`

	status int // the HTTP status when it is not the code's (transport-level refusals)
}

// HTTPStatus is the status this error is written with over HTTP.
func (e *Error) HTTPStatus() int {
	if e.status != 0 {
		return e.status
	}
	return e.Code.HTTPStatus()
}

// Body is the envelope written on the wire: {"error": {...}}.
type Body struct {
	Error *Error `json:"error"`
}

// plain is Error without its methods (MarshalJSON's default encoding).
type plain Error

// MarshalJSON writes field always with INVALID_ARGUMENT and LIMIT_EXCEEDED (SPEC §12: argument
// validation yields them with field); "" names the input as a whole. Other codes omit it
// when empty.
func (e *Error) MarshalJSON() ([]byte, error) {
	if e.Field != "" || (e.Code != InvalidArgument && e.Code != LimitExceeded) {
		return json.Marshal((*plain)(e))
	}
	return json.Marshal(struct {
		*plain
		Field string `json:"field"`
	}{(*plain)(e), ""})
}

func (e *Error) Error() string {
	s := string(e.Code) + ": " + e.Message
	if e.Reason != "" {
		s += " (" + e.Reason + ")"
	}
	return s
}

// New builds an error; Retryable follows the code.
func New(code Code, message string) *Error {
	return &Error{Code: code, Message: message, Retryable: code.Retryable()}
}

// WithReason, WithField, ... return the same error for chaining.
func (e *Error) WithReason(reason string) *Error { e.Reason = reason; return e }
func (e *Error) WithField(field string) *Error   { e.Field = field; return e }
func (e *Error) WithLimit(limit int64) *Error    { e.Limit = &limit; return e }
func (e *Error) WithSuggestion(s string) *Error  { e.SuggestedAction = s; return e }
func (e *Error) WithRetryAfter(seconds int) *Error {
	e.RetryAfterSeconds = &seconds
	return e
}
func (e *Error) WithCurrentRevision(rev int64) *Error {
	s := fmt.Sprint(rev)
	e.CurrentRevision = &s
	return e
}
func (e *Error) WithSettingsRevision(rev int64) *Error {
	s := fmt.Sprint(rev)
	e.SettingsRevision = &s
	return e
}

// Invalid is INVALID_ARGUMENT naming the field.
func Invalid(field, message string) *Error {
	return New(InvalidArgument, message).WithField(field)
}

// Undecodable is INVALID_ARGUMENT for a value the schema admits but the operation's type
// cannot hold (JSON Schema counts 1e3 and 2^70 as integers; a 64-bit field does not), on
// every surface alike.
func Undecodable(field string) *Error {
	return Invalid(field, "cannot be decoded: an integer is written without a fraction or exponent and fits in 64 bits")
}

// TooLarge is LIMIT_EXCEEDED naming the field and the limit.
func TooLarge(field, reason string, limit int64) *Error {
	return New(LimitExceeded, "the value exceeds a published limit").WithField(field).WithReason(reason).WithLimit(limit)
}

// Conflict is REVISION_CONFLICT carrying the current revision.
func Conflict(current int64) *Error {
	return New(RevisionConflict, "the object changed since the expected revision").
		WithCurrentRevision(current).WithSuggestion("read the current value, reapply your change, and retry with the current revision")
}

// NotFound is the uniform NOT_FOUND_OR_FORBIDDEN for an invisible resource (no reason).
func NotFound() *Error {
	return New(NotFoundOrForbidden, "not found, or not visible to this caller")
}

// Forbidden is NOT_FOUND_OR_FORBIDDEN with a reason, for a visible resource without the right.
func Forbidden(reason string) *Error {
	return NotFound().WithReason(reason)
}

// Auth is the one AUTH_FAILED error, identical whatever failed.
func Auth() *Error {
	return New(AuthFailed, "authentication failed")
}

// Storage is STORAGE_FAILURE: nothing was written.
func Storage() *Error {
	return New(StorageFailure, "the operation failed in storage; nothing was written")
}

// OutcomeUnknown is the answer when the connection to the database failed while COMMIT was
// in flight: the write may or may not have persisted, and only a retry with the same
// idempotency key tells (it returns the original result if the write committed).
func OutcomeUnknown() *Error {
	return New(TemporarilyUnavailable, "the database connection failed while the write was committing; it may or may not have been written").
		WithReason("outcome_unknown").
		WithSuggestion("retry with the same idempotency_key: if the write committed, the retry returns its original result")
}

// Unavailable is the answer when the database cannot be reached (or the connection was lost
// before anything was committed): nothing was written and a retry is safe.
func Unavailable() *Error {
	return New(TemporarilyUnavailable, "the database is temporarily unavailable; nothing was written").
		WithReason("database_unavailable").WithSuggestion("retry shortly; a write retries with the same idempotency_key")
}

// IsUnavailable reports whether err is TEMPORARILY_UNAVAILABLE: the database could not
// answer, which says nothing about the caller or its arguments.
func IsUnavailable(err error) bool {
	e, ok := As(err)
	return ok && e.Code == TemporarilyUnavailable
}

// UnsupportedMediaType refuses a request body whose Content-Type the operation does not
// declare in the contract: 415, INVALID_ARGUMENT with reason unsupported_media_type; the
// suggestion names the media types it does declare (accepted; JSON when none is given).
func UnsupportedMediaType(accepted ...string) *Error {
	if len(accepted) == 0 {
		accepted = []string{"application/json"}
	}
	e := New(InvalidArgument, "the request's Content-Type is not one this operation accepts").
		WithReason("unsupported_media_type").WithSuggestion("send the body as " + strings.Join(accepted, " or "))
	e.status = http.StatusUnsupportedMediaType
	return e
}

// UnsupportedContentEncoding is the 415 for an encoded (compressed) request body: the
// server reads bodies as sent, so a gzip body would otherwise fail as malformed JSON and
// send its client looking for a syntax error (RFC 7694: the transport names identity in
// Accept-Encoding).
func UnsupportedContentEncoding() *Error {
	e := New(InvalidArgument, "the request body is encoded (Content-Encoding); the server reads bodies only as sent").
		WithReason("unsupported_content_encoding").WithSuggestion("send the body uncompressed, without a Content-Encoding header")
	e.status = http.StatusUnsupportedMediaType
	return e
}

// WithStatus overrides the HTTP status (transport-level limits such as 413 and 431).
func (e *Error) WithStatus(status int) *Error { e.status = status; return e }

// PathNotFound is the 404 for a path the server does not serve as written (no redirects).
func PathNotFound() *Error {
	e := NotFound()
	e.status = http.StatusNotFound
	return e
}

// MethodNotAllowed is the 405 for a path served under other methods only (the transport sets
// the Allow header listing them).
func MethodNotAllowed() *Error {
	return New(InvalidArgument, "this path does not take this HTTP method; the Allow header lists the methods it takes").
		WithReason("method_not_allowed").WithStatus(http.StatusMethodNotAllowed)
}

// StatusOf is the HTTP status an error is reported with (500 for anything unexpected).
func StatusOf(err error) int {
	if e, ok := As(err); ok {
		return e.HTTPStatus()
	}
	return http.StatusInternalServerError
}

// As extracts an *Error from err.
func As(err error) (*Error, bool) {
	var e *Error
	ok := errors.As(err, &e)
	return e, ok
}
