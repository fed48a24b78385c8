package cli

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/agentbox/agentbox/internal/apierr"
	"github.com/agentbox/agentbox/internal/mcpserver"
)

// What goes wrong below the API, for the admin and agent commands alike (exit 1, the cause
// on stderr, nothing on stdout): AGENTBOX_SERVER is not a server URL (a configuration
// mistake, exit 2 like a missing AGENTBOX_API_KEY), the server cannot be reached or the
// connection is lost (transportError), or what answers is not Agentbox (unexpectedAnswer).
// Only the server says RATE_LIMITED or TEMPORARILY_UNAVAILABLE (exit 7): the CLI never makes
// up an error body. `agentbox mcp` reports the same failures to its agents as
// TEMPORARILY_UNAVAILABLE, retryable (mcpserver.Forwarder), since a model can only retry:
// reason outcome_unknown when the request went out, told apart as here
// (mcpserver.WatchSent). The CLI tells a person or a script what happened, and when a
// write's outcome is unknown, how to repeat it safely (its idempotency key, SPEC §12;
// mcpserver.RepeatOf).

// errBadServer: AGENTBOX_SERVER is not an http(s) URL with a host. Its value is not shown: it
// may carry credentials.
var errBadServer = usageError{"AGENTBOX_SERVER must be the agentbox server's URL: http:// or https:// and a host, e.g. http://127.0.0.1:8080"}

// serverBase is AGENTBOX_SERVER (default http://127.0.0.1:8080) checked as the base URL of
// the API, and the form messages show (without a password).
func serverBase() (base, shown string, err error) {
	s := serverURL()
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Opaque != "" ||
		u.RawQuery != "" || u.Fragment != "" {
		return "", "", errBadServer
	}
	return s, u.Redacted(), nil
}

// link is the HTTP client of one command: it keeps the last failure below the API, which
// explain reports instead of what the shared forwarder makes of it.
type link struct {
	server string // AGENTBOX_SERVER as shown
	base   http.RoundTripper
	mu     sync.Mutex
	fail   error
}

func newLink(shown string) *link { return &link{server: shown, base: http.DefaultTransport} }

// httpClient is an HTTP client over l (timeout 0: none).
func (l *link) httpClient(timeout time.Duration) *http.Client {
	return &http.Client{Transport: l, Timeout: timeout}
}

func (l *link) record(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.fail = err
}

// failure is the failure recorded, if any.
func (l *link) failure() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.fail
}

// explain is err, or the failure below the API that caused it; after says what repeating
// the command does when the request went out (the call may have taken effect).
func (l *link) explain(err error, after string) error {
	if err == nil {
		return nil
	}
	var te *transportError
	if f := l.failure(); errors.As(f, &te) {
		c := *te
		c.after = after
		return &c
	} else if f != nil {
		return f
	}
	return err
}

// RoundTrip sends r, noting whether its headers went out, and records a transport failure
// or an error answer that is not Agentbox's.
func (l *link) RoundTrip(r *http.Request) (*http.Response, error) {
	ctx, sent := mcpserver.WatchSent(r.Context())
	r = r.WithContext(ctx)
	resp, err := l.base.RoundTrip(r)
	if err != nil {
		l.record(&transportError{server: l.server, cause: err, sent: sent(), method: r.Method})
		return nil, err
	}
	if resp.StatusCode/100 != 2 {
		if err := l.checkErrorAnswer(resp); err != nil {
			l.record(err)
		}
	}
	resp.Body = &watchedBody{ReadCloser: resp.Body, l: l, method: r.Method}
	return resp, nil
}

// maxErrorBody bounds the error answer read to check it.
const maxErrorBody = 1 << 20

// checkErrorAnswer reads an error answer (and puts it back): Agentbox answers every error
// with a JSON error body carrying one of its codes.
func (l *link) checkErrorAnswer(resp *http.Response) error {
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody+1))
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	if err != nil {
		return &transportError{server: l.server, cause: err, sent: true, method: resp.Request.Method}
	}
	mediaType, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	var eb apierr.Body
	if mediaType != "application/json" || len(body) > maxErrorBody || json.Unmarshal(body, &eb) != nil ||
		eb.Error == nil || !slices.Contains(apierr.Codes, eb.Error.Code) {
		return &unexpectedAnswer{server: l.server, status: resp.StatusCode, mediaType: mediaType}
	}
	return nil
}

// watchedBody records a connection lost while the answer is read.
type watchedBody struct {
	io.ReadCloser
	l      *link
	method string
}

func (b *watchedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && err != io.EOF {
		b.l.record(&transportError{server: b.l.server, cause: err, sent: true, method: b.method})
	}
	return n, err
}

// transportError: no answer from the server.
type transportError struct {
	server string
	cause  error
	sent   bool   // the request went out: the call may have taken effect
	method string // the request's
	after  string // what repeating the command does, when sent
}

func (e *transportError) Error() string {
	cause := e.cause.Error()
	var notTLS tls.RecordHeaderError
	switch {
	case errors.Is(e.cause, context.DeadlineExceeded) || os.IsTimeout(e.cause):
		cause = "no answer in time"
	case errors.Is(e.cause, io.EOF) || errors.Is(e.cause, io.ErrUnexpectedEOF):
		cause = "the server closed the connection"
	case errors.As(e.cause, &notTLS):
		cause += " (is the server plain http://?)"
	}
	if !e.sent {
		return fmt.Sprintf("cannot reach the agentbox server at %s (AGENTBOX_SERVER): %s; nothing was sent", e.server, cause)
	}
	msg := fmt.Sprintf("the connection to the agentbox server at %s (AGENTBOX_SERVER) failed before its answer arrived: %s", e.server, cause)
	if e.after != "" {
		msg += "; " + e.after
	}
	return msg
}

func (e *transportError) Unwrap() error { return e.cause }

// unexpectedAnswer: an error answer without Agentbox's error body, e.g. another web server
// or a proxy at AGENTBOX_SERVER. The body is not shown.
type unexpectedAnswer struct {
	server    string
	status    int
	mediaType string
}

func (e *unexpectedAnswer) Error() string {
	what := "no body type"
	if e.mediaType != "" {
		what = e.mediaType
	}
	return fmt.Sprintf("unexpected answer from %s (AGENTBOX_SERVER): status %d (%s) without an Agentbox error body; "+
		"is AGENTBOX_SERVER the agentbox server's URL, or did a proxy in front of it answer?", e.server, e.status, what)
}
