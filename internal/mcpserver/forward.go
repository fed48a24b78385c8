package mcpserver

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/http/httptrace"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbox/agentbox/gen/client"
	genmcp "github.com/agentbox/agentbox/gen/mcp"
	"github.com/agentbox/agentbox/internal/apierr"
	"github.com/agentbox/agentbox/internal/boxkey"
	"github.com/agentbox/agentbox/internal/schema"
)

// Credentials are the agent keys of a local process (`agentbox mcp`, the agent CLI): one
// key for every box (AGENTBOX_API_KEY), or one key per box_key (AGENTBOX_CREDENTIALS, a
// JSON file mapping box_key → key). A box_key selects its key; it is never authority.
type Credentials struct {
	any   string
	byBox map[string]string
}

// CredentialsFromEnv reads AGENTBOX_CREDENTIALS (preferred) or AGENTBOX_API_KEY. A key must
// be visible ASCII without spaces (ValidKey; surrounding whitespace is dropped): one that is
// not could never be sent, and is refused naming where it came from, never its value.
func CredentialsFromEnv(getenv func(string) string) (Credentials, error) {
	if path := getenv("AGENTBOX_CREDENTIALS"); path != "" {
		raw, err := os.ReadFile(path)
		if err != nil {
			return Credentials{}, fmt.Errorf("AGENTBOX_CREDENTIALS: %w", err)
		}
		var m map[string]string
		if err := json.Unmarshal(raw, &m); err != nil || len(m) == 0 {
			return Credentials{}, fmt.Errorf("AGENTBOX_CREDENTIALS: %s must be a JSON object mapping box_key to API key", path)
		}
		for box, key := range m {
			key = strings.TrimSpace(key)
			if box == "" || key == "" {
				return Credentials{}, fmt.Errorf("AGENTBOX_CREDENTIALS: %s has an empty box_key or key", path)
			}
			if !boxkey.Valid(box) {
				return Credentials{}, fmt.Errorf("AGENTBOX_CREDENTIALS: %s has a name that %s", path, notABoxKey)
			}
			if !ValidKey(key) {
				return Credentials{}, fmt.Errorf("AGENTBOX_CREDENTIALS: in %s, the key for box_key %q %s", path, box, notAKey)
			}
			m[box] = key
		}
		return Credentials{byBox: m}, nil
	}
	if key := strings.TrimSpace(getenv("AGENTBOX_API_KEY")); key != "" {
		if !ValidKey(key) {
			return Credentials{}, fmt.Errorf("AGENTBOX_API_KEY %s", notAKey)
		}
		return Credentials{any: key}, nil
	}
	return Credentials{}, fmt.Errorf("set AGENTBOX_API_KEY, or AGENTBOX_CREDENTIALS to a JSON file mapping box_key to API key")
}

const notAKey = "is not an API key: it has a character other than visible ASCII (a space, a line break, a control or non-ASCII character)"

// ValidKey: a credential (API key, admin token) is visible ASCII without spaces (0x21–0x7E),
// as a bearer token in an Authorization header.
func ValidKey(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// SessionFromEnv is AGENTBOX_SESSION ("" when unset or empty), checked by the server's rule for the
// Agentbox-Session header (at most 128 printable ASCII characters) so that a value that
// could not be sent, or would be refused, is named before anything is sent — never echoed.
func SessionFromEnv(getenv func(string) string) (string, error) {
	s := getenv("AGENTBOX_SESSION")
	if s != "" && strings.TrimSpace(s) == "" {
		// HTTP trims a header's surrounding spaces, so a blank name would arrive as no
		// header: the key's shared session lane, not the separate session it asks for.
		return "", fmt.Errorf("AGENTBOX_SESSION is blank: name a session, or unset it for one session per process")
	}
	if len(s) > maxSessionLen {
		return "", fmt.Errorf("AGENTBOX_SESSION is longer than %d characters (the Agentbox-Session header's bound)", maxSessionLen)
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return "", fmt.Errorf("AGENTBOX_SESSION must be printable ASCII (the Agentbox-Session header's rule): it has a control or non-ASCII character")
		}
	}
	return s, nil
}

// BoxFromEnv is AGENTBOX_BOX ("" when unset), checked by the box_key pattern: a value no
// box can have would make every call AUTH_FAILED, and the start check would blame the key.
// Never echoed.
func BoxFromEnv(getenv func(string) string) (string, error) {
	box := getenv("AGENTBOX_BOX")
	if box != "" && !boxkey.Valid(box) {
		return "", fmt.Errorf("AGENTBOX_BOX %s", notABoxKey)
	}
	return box, nil
}

// notABoxKey says what a box_key is, after the variable or file that holds a malformed one.
const notABoxKey = "is not a box_key (2 to 63 characters: lower-case letters, digits and '-', not first)"

// maxSessionLen is the server's bound on the Agentbox-Session header (internal/auth).
const maxSessionLen = 128

// Key is the credential for boxKey.
func (c Credentials) Key(boxKey string) (string, bool) {
	if c.byBox != nil {
		k, ok := c.byBox[boxKey]
		return k, ok
	}
	return c.any, c.any != ""
}

// Boxes are the box keys of a credentials file, sorted (none for a single key).
func (c Credentials) Boxes() []string {
	var out []string
	for b := range c.byBox {
		out = append(out, b)
	}
	sort.Strings(out)
	return out
}

// NewSessionKey is a fresh Agentbox-Session value for one local process (SPEC §3: the stdio
// process sets one it generates at start).
func NewSessionKey(prefix string) string {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	return prefix + hex.EncodeToString(b)
}

// Forwarder is the Backend of the local processes: every call goes to the HTTP API through
// gen/client with the box's key and the process's Agentbox-Session header. It never opens
// the database; the server authenticates, authorizes and validates as for any HTTP call.
type Forwarder struct {
	server  string // named in transport errors ("cannot be reached": the usual cause is a wrong AGENTBOX_SERVER)
	client  *client.Client
	creds   Credentials
	session string // Agentbox-Session; "" uses the key's session lane
}

// callTimeout bounds each HTTP call of a Forwarder built without its own client.
const callTimeout = time.Minute

// NewForwarder calls the server at serverURL (AGENTBOX_SERVER).
func NewForwarder(serverURL string, creds Credentials, session string, httpClient *http.Client) (*Forwarder, error) {
	if httpClient == nil {
		// Every operation answers promptly (polling never blocks); a silent server is an
		// outage the caller should hear about, not a hang.
		httpClient = &http.Client{Timeout: callTimeout}
	}
	c, err := client.NewClient(strings.TrimRight(serverURL, "/"), client.WithHTTPClient(httpClient))
	if err != nil {
		return nil, err
	}
	return &Forwarder{server: strings.TrimRight(serverURL, "/"), client: c, creds: creds, session: session}, nil
}

// CheckBox refuses a box this process holds no key for (a credentials file); with a single
// key the server decides.
func (f *Forwarder) CheckBox(_ context.Context, _ *mcp.CallToolRequest, boxKey string) error {
	if _, ok := f.creds.Key(boxKey); !ok {
		return apierr.Auth()
	}
	return nil
}

// Call forwards op; req may be nil (the CLI).
func (f *Forwarder) Call(ctx context.Context, _ *mcp.CallToolRequest, op *genmcp.Operation, args map[string]json.RawMessage) (json.RawMessage, error) {
	var boxKey string
	json.Unmarshal(args["box_key"], &boxKey) //nolint:errcheck // validated by the input schema
	key, ok := f.creds.Key(boxKey)
	if !ok {
		return nil, apierr.Auth()
	}
	ctx, sent := WatchSent(ctx)
	resp, err := genmcp.CallHTTP(ctx, f.client, op.OperationID, args, f.editor(key))
	if err != nil {
		var ae *genmcp.ArgumentError
		if errors.As(err, &ae) {
			return nil, err
		}
		if sent() {
			return nil, f.lost(op, args)
		}
		return nil, f.unreachable()
	}
	raw, err := readBody(resp)
	if err != nil {
		return nil, f.lost(op, args)
	}
	body, err := answer(resp.StatusCode, raw)
	if err == nil && !AnswerFits(op, body) {
		return nil, &UnexpectedAnswerError{Operation: op.OperationID, Status: resp.StatusCode}
	}
	return body, err
}

// WatchSent is ctx traced so that sent reports whether an HTTP request made with it went out
// (its headers were written). A failure after that may have reached the server: a write's
// outcome is then unknown (SPEC §12). One before it (connection refused, DNS, TLS, dial)
// sent nothing. The forwarder and the CLI's link (internal/cli) tell the two apart by it.
func WatchSent(ctx context.Context) (_ context.Context, sent func() bool) {
	var wrote atomic.Bool
	return httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{WroteHeaders: func() { wrote.Store(true) }}), wrote.Load
}

// Repeat is what repeating a call whose answer was lost does (SPEC §12).
type Repeat int

const (
	RepeatChangesNothing Repeat = iota // a read, or a dry run (SPEC §10): it wrote nothing
	RepeatWithKey                      // a write with its idempotency_key: repeated with it, it applies at most once and answers with its result
	RepeatIsSafe                       // a write idempotent by nature (agent_prime)
	RepeatMayApplyTwice                // a write that a repeat may apply again
)

// RepeatOf says what repeating a call of t with args does, and the call's idempotency_key
// when it has one. The forwarder tells a model, the CLI a person.
func RepeatOf(t *genmcp.Tool, args map[string]json.RawMessage) (Repeat, string) {
	var dryRun bool
	var key string
	json.Unmarshal(args["dry_run"], &dryRun)      //nolint:errcheck // validated by the input schema
	json.Unmarshal(args["idempotency_key"], &key) //nolint:errcheck // validated by the input schema
	switch {
	case t.Annotations.ReadOnlyHint, dryRun:
		return RepeatChangesNothing, ""
	case key != "":
		return RepeatWithKey, key
	case t.Annotations.IdempotentHint:
		return RepeatIsSafe, ""
	}
	return RepeatMayApplyTwice, ""
}

// lost is the answer to a call of op whose request went out but whose answer did not come
// back: the server's outcome_unknown (apierr.OutcomeUnknown, the same object), saying what
// failed and how to repeat the call.
func (f *Forwarder) lost(op *genmcp.Operation, args map[string]json.RawMessage) *apierr.Error {
	repeat := RepeatMayApplyTwice
	if op.Tool != nil {
		repeat, _ = RepeatOf(op.Tool, args)
	} else if op.Method == http.MethodGet {
		repeat = RepeatChangesNothing
	}
	e := apierr.OutcomeUnknown()
	e.Message = fmt.Sprintf("the connection to the agentbox server at %s (AGENTBOX_SERVER) failed before its answer arrived", f.server)
	switch repeat {
	case RepeatChangesNothing:
		e.Message += "; the call changed nothing"
		e.SuggestedAction = "retry"
		return e
	case RepeatWithKey: // the server's own suggestion
	case RepeatIsSafe:
		e.SuggestedAction = "retry: repeating this call is safe"
	default:
		e.SuggestedAction = "look whether the call took effect before repeating it"
	}
	e.Message += "; the call may or may not have been applied"
	return e
}

// ReasonUnexpectedAnswer is the reason of the TEMPORARILY_UNAVAILABLE a tool call answers
// for an UnexpectedAnswerError.
const ReasonUnexpectedAnswer = "unexpected_answer"

// UnexpectedAnswerError: a success status whose body is not the operation's answer, e.g.
// another web server or a proxy at AGENTBOX_SERVER answering 200. The body is not shown.
type UnexpectedAnswerError struct {
	Operation string
	Status    int
}

func (e *UnexpectedAnswerError) Error() string {
	return fmt.Sprintf("unexpected answer from AGENTBOX_SERVER: status %d with a body that is not agentbox's %s answer; "+
		"is AGENTBOX_SERVER the agentbox server's URL, or did a proxy in front of it answer?", e.Status, e.Operation)
}

// openOutputs holds each operation's open output schema (additionalProperties true at every
// object node: a newer server's extra fields still fit), compiled on first use.
var openOutputs sync.Map // operation ID → *schema.Validator

// AnswerFits reports whether a success body is op's answer by its open output schema.
func AnswerFits(op *genmcp.Operation, body []byte) bool {
	if op.Output == nil || len(op.AdvertisedOutputSchema) == 0 {
		return true // no JSON success body to check
	}
	v, ok := openOutputs.Load(op.OperationID)
	if !ok {
		v, _ = openOutputs.LoadOrStore(op.OperationID, schema.MustCompile(op.OperationID+".open_output", op.AdvertisedOutputSchema))
	}
	return v.(*schema.Validator).ValidateJSON(body) == nil
}

// Me asks the server who the key for boxKey is (router mode, identity).
func (f *Forwarder) Me(ctx context.Context, boxKey string) (json.RawMessage, error) {
	key, ok := f.creds.Key(boxKey)
	if !ok {
		return nil, apierr.Auth()
	}
	resp, err := f.client.MeGet(ctx, boxKey, nil, f.editor(key))
	if err != nil {
		return nil, f.unreachable()
	}
	return ReadResponse(resp)
}

// ErrNotAgentbox: what answers at AGENTBOX_SERVER is not the agentbox server's API (another
// web server, or the right server under a URL with a path).
var ErrNotAgentbox = errors.New("AGENTBOX_SERVER does not answer as the agentbox server: give the server's base URL, e.g. http://127.0.0.1:8080")

// CheckServer asks the server for an answer only Agentbox gives, as the key this process
// holds for boxKey: GET /me as that key answers 200 with the key's identity (the body is
// returned: it proves the server and the key), or refuses it with the error body, returned as
// its *apierr.Error (AUTH_FAILED for a bad key, TEMPORARILY_UNAVAILABLE while the database
// is down): the server answered as Agentbox, and the caller decides what the refusal means.
// Without a key for boxKey (boxKey "": a single key whose box is unknown) it asks without a
// key, and the refusal Agentbox always answers is the whole proof; the server then counts
// that call as a failed authentication, so it is done only when no box has a key. Any other
// answer is ErrNotAgentbox, a mistake no retry mends. No answer at all is the transport's
// error: the server may start later.
func (f *Forwarder) CheckServer(ctx context.Context, boxKey string) (json.RawMessage, error) {
	var editors []client.RequestEditorFn
	key, keyed := "", false
	if boxKey != "" {
		key, keyed = f.creds.Key(boxKey)
	}
	if keyed {
		editors = append(editors, f.editor(key))
	} else if boxKey == "" {
		boxKey = "agentbox"
	}
	resp, err := f.client.MeGet(ctx, boxKey, nil, editors...)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, err
	}
	notAgentbox := fmt.Errorf("%w (it answered status %d)", ErrNotAgentbox, resp.StatusCode)
	if mediaType, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mediaType != "application/json" {
		return nil, notAgentbox
	}
	if keyed && resp.StatusCode == http.StatusOK {
		var me struct {
			BoxKey string `json:"box_key"`
		}
		if json.Unmarshal(body, &me) != nil || me.BoxKey != boxKey {
			return nil, notAgentbox
		}
		return body, nil
	}
	var eb apierr.Body
	if resp.StatusCode == http.StatusNotFound || json.Unmarshal(body, &eb) != nil ||
		eb.Error == nil || !slices.Contains(apierr.Codes, eb.Error.Code) {
		return nil, notAgentbox
	}
	if keyed {
		return nil, eb.Error
	}
	return nil, nil
}

func (f *Forwarder) unreachable() *apierr.Error {
	return apierr.New(apierr.TemporarilyUnavailable, fmt.Sprintf("the agentbox server at %s (AGENTBOX_SERVER) cannot be reached; retry", f.server))
}

func (f *Forwarder) editor(key string) client.RequestEditorFn {
	return func(_ context.Context, r *http.Request) error {
		r.Header.Set("Authorization", "Bearer "+key)
		if f.session != "" {
			r.Header.Set("Agentbox-Session", f.session)
		}
		return nil
	}
}

// ReadResponse turns an HTTP API answer into its success body or its *apierr.Error.
func ReadResponse(resp *http.Response) (json.RawMessage, error) {
	body, err := readBody(resp)
	if err != nil {
		return nil, apierr.New(apierr.TemporarilyUnavailable, "the answer of the agentbox server was cut off; retry")
	}
	return answer(resp.StatusCode, body)
}

// readBody reads and closes the answer's body; an error means it was cut off.
func readBody(resp *http.Response) ([]byte, error) {
	defer resp.Body.Close()
	return io.ReadAll(resp.Body)
}

// answer is an answer's success body or its *apierr.Error.
func answer(status int, body []byte) (json.RawMessage, error) {
	if status/100 == 2 {
		if !json.Valid(body) {
			return nil, fmt.Errorf("the server answered status %d with a non-JSON body", status)
		}
		return body, nil
	}
	var eb apierr.Body
	if json.Unmarshal(body, &eb) != nil || eb.Error == nil || eb.Error.Code == "" {
		return nil, apierr.New(apierr.TemporarilyUnavailable, fmt.Sprintf("the agentbox server answered status %d without an error body; retry", status))
	}
	return nil, eb.Error
}
