package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// The harness speaks the HTTP contract (spec/openapi.json) with plain net/http and JSON:
// it is a load generator sharing the machine's cores with the server, so it keeps its own
// per-request work small (pre-encoded bodies, small response structs).

// NotAvailableError marks a workload the server cannot run yet (an operation answers
// NOT_FOUND_OR_FORBIDDEN with reason not_implemented, or a transport is missing). The
// workload is reported as "not available: <What>" instead of failing the run.
type NotAvailableError struct{ What string }

func (e *NotAvailableError) Error() string { return "not available: " + e.What }

func notAvailable(format string, a ...any) error {
	return &NotAvailableError{What: fmt.Sprintf(format, a...)}
}

// APIError is an error body from the server.
type APIError struct {
	Op      string
	Status  int
	Code    string `json:"code"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
	Field   string `json:"field"`
}

func (e *APIError) Error() string {
	s := fmt.Sprintf("%s: HTTP %d %s", e.Op, e.Status, e.Code)
	if e.Reason != "" {
		s += " (" + e.Reason + ")"
	}
	if e.Field != "" {
		s += " field " + e.Field
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	return s
}

// isNotImplemented recognizes the answer of an operation whose stub is still in place.
func isNotImplemented(code, reason string) bool {
	return code == "NOT_FOUND_OR_FORBIDDEN" && reason == "not_implemented"
}

// client is an HTTP client for one server.
type client struct {
	base string // http://host:port
	http *http.Client
}

func newClient(base string, conns int) *client {
	tr := &http.Transport{
		MaxIdleConns:        0,
		MaxIdleConnsPerHost: conns,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}
	// Phases abandon stuck requests themselves; this bounds setup calls.
	return &client{base: strings.TrimRight(base, "/"), http: &http.Client{Transport: tr, Timeout: time.Minute}}
}

// do sends one request and decodes a 200 answer into out (nil: discard). body may be nil,
// []byte (already JSON) or any value to encode. An error body becomes *APIError, or a
// *NotAvailableError when the operation is not implemented yet.
func (c *client) do(ctx context.Context, op, method, path, bearer, session string, body, out any) error {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		rd = bytes.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return err
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	if session != "" {
		req.Header.Set("Agentbox-Session", session)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("%s: reading the answer: %w", op, err)
	}
	if resp.StatusCode == http.StatusOK {
		if out == nil {
			return nil
		}
		if err := json.Unmarshal(raw, out); err != nil {
			return fmt.Errorf("%s: decoding the answer: %w", op, err)
		}
		return nil
	}
	var eb struct {
		Error *APIError `json:"error"`
	}
	if json.Unmarshal(raw, &eb) != nil || eb.Error == nil {
		return &APIError{Op: op, Status: resp.StatusCode, Message: "no error body"}
	}
	eb.Error.Op, eb.Error.Status = op, resp.StatusCode
	if isNotImplemented(eb.Error.Code, eb.Error.Reason) {
		return notAvailable("%s not implemented", op)
	}
	return eb.Error
}

// admin calls an admin route with the admin token.
func (c *client) admin(ctx context.Context, token, op, method, path string, body, out any) error {
	return c.do(ctx, op, method, "/admin/api/v1"+path, token, "", body, out)
}

// agent is one agent credential in a box, with an optional session header.
type agent struct {
	Box     string
	ID      string
	Name    string
	Key     string
	Session string // Agentbox-Session; "" = the key's own session lane
}

// withSession is the same agent under another session header.
func (a *agent) withSession(s string) *agent {
	c := *a
	c.Session = s
	return &c
}

// call sends an agent request to /api/v1/boxes/{box}<path>.
func (c *client) call(ctx context.Context, a *agent, op, method, path string, body, out any) error {
	return c.do(ctx, op, method, "/api/v1/boxes/"+a.Box+path, a.Key, a.Session, body, out)
}

// prime opens the agent's session (required before any other agent call); it returns the
// session ID.
func (c *client) prime(ctx context.Context, a *agent) (string, error) {
	var out struct {
		Session struct {
			SessionID string `json:"session_id"`
		} `json:"session"`
	}
	if err := c.call(ctx, a, "agent_prime", "POST", "/prime", []byte("{}"), &out); err != nil {
		return "", err
	}
	return out.Session.SessionID, nil
}

// destinationQuery encodes a destination as the deepObject query the contract declares.
func destinationQuery(kind, id string) string {
	field := "room_id"
	if kind == "dm" {
		field = "recipient_agent_id"
	}
	v := url.Values{}
	v.Set("destination[kind]", kind)
	v.Set("destination["+field+"]", id)
	return v.Encode()
}

// sendResult is the part of message_send's answer the workloads use.
type sendResult struct {
	Status         string `json:"status"`
	MessageID      string `json:"message_id"`
	MessageSeq     string `json:"message_seq"`
	AttentionCount int64  `json:"attention_count"`
}

// inboxItem is the part of an inbox row the workloads use.
type inboxItem struct {
	InboxSeq string `json:"inbox_seq"`
	Message  struct {
		MessageID string `json:"message_id"`
		BodyMD    string `json:"body_md"`
	} `json:"message"`
}

type inboxPage struct {
	Items       []inboxItem `json:"items"`
	UnreadCount int64       `json:"unread_count"`
}

type messagePage struct {
	Items []json.RawMessage `json:"items"`
}

// errorsAsNotAvailable reports whether err (or an error it wraps) is a NotAvailableError.
func errorsAsNotAvailable(err error) (*NotAvailableError, bool) {
	var na *NotAvailableError
	ok := errors.As(err, &na)
	return na, ok
}
