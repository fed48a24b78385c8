// Package mcpserver is the MCP tool surface (SPEC §13.2) on the official Go SDK: every tool
// of the registry in gen/mcp is registered by one loop, arguments are validated by the
// project's own schema runtime (closed input schemas, strict UTF-8), results carry
// structuredContent plus a JSON text mirror, expected failures are isError results with
// structuredContent.error, aliases are accepted but never listed, and router mode lists
// only the router tools and agent_prime.
//
// Where a call runs is a Backend: in process against the service for the /mcp endpoint
// (package mcphttp), or forwarded to the HTTP API through gen/client for `agentbox mcp`
// over stdio (Forwarder). This package never imports the service or the store.
package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	genmcp "github.com/agentbox/agentbox/gen/mcp"
	"github.com/agentbox/agentbox/internal/apierr"
	"github.com/agentbox/agentbox/internal/boxkey"
	"github.com/agentbox/agentbox/internal/schema"
)

// Backend runs registry operations for the caller of a tools/call.
type Backend interface {
	// CheckBox fails with AUTH_FAILED unless the caller's credential belongs to boxKey.
	// Every tools/call names its box_key; a wrong box fails closed.
	CheckBox(ctx context.Context, req *mcp.CallToolRequest, boxKey string) error
	// Call runs op with arguments already validated against op.Input and returns the
	// operation's success body, or an error (*apierr.Error for expected failures).
	Call(ctx context.Context, req *mcp.CallToolRequest, op *genmcp.Operation, args map[string]json.RawMessage) (json.RawMessage, error)
}

// RefusalRecorder is a Backend that also records the tool calls refused before Call ran
// them (arguments that fail the input schema, a wrong box, arguments over the bound), as its
// Call records the calls it runs (/metrics counts both; over stdio such a refusal never
// reaches the server).
type RefusalRecorder interface {
	Refused(ctx context.Context, op *genmcp.Operation, err *apierr.Error, d time.Duration)
}

// Options configure New.
type Options struct {
	// Router selects router mode: tools/list advertises only the router tools and
	// agent_prime; tool_execute reaches every other tool with the same authorization.
	Router  bool
	Version string       // the server version reported at initialization
	Log     *slog.Logger // nil: discard
}

// bootstrapTool is the one ordinary tool router mode lists beside the router tools: every
// session starts with it (SPEC §13.2).
const bootstrapTool = "agent_prime"

// listTTLMillis is the freshness hint on tools/list: the list changes only with a deployment.
const listTTLMillis = 3_600_000

// New builds the MCP server for one mode over b.
func New(b Backend, o Options) *mcp.Server {
	s, _ := Build(b, o)
	return s
}

// Build is New plus the server's tools/call surface (see Calls).
func Build(b Backend, o Options) (*mcp.Server, *Calls) {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Version == "" {
		o.Version = "dev"
	}
	sf := &surface{backend: b, log: o.Log, canonical: map[string]string{}}
	impl := &mcp.Implementation{Name: genmcp.Server.Name, Version: o.Version}
	calls := &Calls{sf: sf, entries: map[string]*entry{}, impl: impl}
	s := mcp.NewServer(impl, &mcp.ServerOptions{
		Instructions: genmcp.Server.Instructions,
		Logger:       WarnOnly(o.Log),
		// Tools only, and a static list: no logging capability, no list-changed notifications.
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{}},
		// tools/list depends on the key's mode, so only the caller's client may cache it.
		SetCacheable: func(_ context.Context, _ mcp.Request, c *mcp.Cacheable) {
			c.TTLMs, c.CacheScope = listTTLMillis, "private"
		},
	})
	for _, t := range genmcp.Tools {
		if !served(t, o.Router) {
			continue
		}
		e := sf.entry(t)
		s.AddTool(e.descriptor(), e.handle)
		sf.canonical[t.Name] = t.Name
		calls.entries[t.Name] = e
		for _, a := range t.Aliases {
			sf.canonical[a] = t.Name
			calls.entries[a] = e
		}
	}
	// Aliases are accepted by tools/call and never listed: the call is renamed to its
	// canonical tool before the SDK looks the tool up. Names not served in this mode stay
	// unknown to the SDK (a JSON-RPC error, as for any unknown tool).
	s.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if r, ok := req.(*mcp.CallToolRequest); ok && method == "tools/call" && r.Params != nil {
				name, ok := sf.canonical[r.Params.Name]
				if !ok {
					// The SDK's own error would quote the name: protocol errors never echo
					// caller-supplied values (SPEC §13.2).
					return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: ProtocolErrorMessage(jsonrpc.CodeInvalidParams)}
				}
				r.Params.Name = name
			}
			return next(ctx, method, req)
		}
	})
	return s, calls
}

// served reports whether t is listed (and callable) in the mode: exposure default outside
// router mode; the router tools and agent_prime in router mode. Hidden tools are CLI-only.
func served(t *genmcp.Tool, router bool) bool {
	if router {
		return isRouterTool(t) || t.Name == bootstrapTool
	}
	return t.Exposure == "default" && !isRouterTool(t)
}

// surface is the state shared by the tool handlers of one server.
type surface struct {
	backend   Backend
	log       *slog.Logger
	canonical map[string]string // served name or alias → canonical name
}

// entry is one served tool: its contract and how it runs.
type entry struct {
	sf           *surface
	tool         *genmcp.Tool
	op           *genmcp.Operation // nil for the router tools
	input        *schema.Validator
	inputSchema  json.RawMessage
	outputSchema json.RawMessage // advertised (open)
	run          func(ctx context.Context, req *mcp.CallToolRequest, args map[string]json.RawMessage) (json.RawMessage, error)
}

func (sf *surface) entry(t *genmcp.Tool) *entry {
	if isRouterTool(t) {
		return sf.routerEntry(t)
	}
	op := genmcp.Operations[t.OperationID]
	if op == nil || op.Output == nil {
		panic(fmt.Sprintf("mcpserver: tool %s has no operation with a JSON result", t.Name))
	}
	return &entry{sf: sf, tool: t, op: op, input: op.Input, inputSchema: advertisedInput(op.InputSchema), outputSchema: advertisedOutput(op.AdvertisedOutputSchema),
		run: func(ctx context.Context, req *mcp.CallToolRequest, args map[string]json.RawMessage) (json.RawMessage, error) {
			return sf.backend.Call(ctx, req, op, args)
		}}
}

// descriptor is the tools/list entry: contract fields and the explicit annotation table.
func (e *entry) descriptor() *mcp.Tool {
	a := e.tool.Annotations
	return &mcp.Tool{
		Name:         e.tool.Name,
		Title:        e.tool.Title,
		Description:  e.tool.Description,
		InputSchema:  e.inputSchema,
		OutputSchema: e.outputSchema,
		Annotations: &mcp.ToolAnnotations{
			ReadOnlyHint:    a.ReadOnlyHint,
			DestructiveHint: &a.DestructiveHint,
			IdempotentHint:  a.IdempotentHint,
			OpenWorldHint:   &a.OpenWorldHint,
		},
	}
}

// handle is the tools/call handler.
func (e *entry) handle(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	body, fail := e.call(ctx, req, req.Params.Arguments)
	if fail != nil {
		return errorResult(fail), nil
	}
	return successResult(body)
}

// call checks the arguments with our own code (never the SDK's), runs the tool and returns
// its success body or the structured error.
func (e *entry) call(ctx context.Context, req *mcp.CallToolRequest, raw json.RawMessage) (json.RawMessage, *apierr.Error) {
	start := time.Now()
	args, err := e.sf.arguments(ctx, req, e.input, raw)
	if err != nil {
		fail := e.sf.wireError(ctx, e.tool.Name, err)
		e.sf.refused(ctx, e.op, fail, start)
		return nil, fail
	}
	body, err := e.run(ctx, req, args)
	if err != nil {
		return nil, e.sf.wireError(ctx, e.tool.Name, err)
	}
	if len(body) > e.tool.ResultBudgetBytes {
		e.sf.log.WarnContext(ctx, "tool result exceeds its result budget", slog.String("tool", e.tool.Name),
			slog.Int("bytes", len(body)), slog.Int("budget", e.tool.ResultBudgetBytes))
	}
	return body, nil
}

// arguments decodes raw tool arguments strictly (valid UTF-8, no lone surrogates, one JSON
// object), checks the box (AUTH_FAILED before anything else, as the HTTP path does), then
// validates them against the tool's closed input schema. Arguments valid as they stand (the
// schema's fast path, as for HTTP bodies: httpserver.ValidateBody) are decoded only into the
// members the dispatch reads; any others are decoded strictly and validated by the general
// validator, which alone reports what is wrong.
func (sf *surface) arguments(ctx context.Context, req *mcp.CallToolRequest, input *schema.Validator, raw json.RawMessage) (map[string]json.RawMessage, error) {
	if t := bytes.TrimSpace(raw); len(t) == 0 || bytes.Equal(t, []byte("null")) {
		raw = []byte("{}")
	}
	if IsTooDeepArguments(raw) { // LimitNesting's stand-in: the HTTP API's error for a body nested too deep
		return nil, apierr.FromDecode(schema.ErrTooDeep)
	}
	valid := input.Accepts(raw)
	var doc any
	if !valid {
		var err error
		if doc, err = schema.DecodeStrict(raw); err != nil {
			return nil, apierr.FromDecode(err)
		}
		if _, ok := doc.(map[string]any); !ok {
			return nil, apierr.Invalid("", "the arguments must be a JSON object")
		}
	}
	var args map[string]json.RawMessage
	if err := json.Unmarshal(raw, &args); err != nil {
		return nil, apierr.Invalid("", "the arguments must be a JSON object")
	}
	// A box_key of another type is the schema's to refuse, not an authentication failure; a
	// string that does not match the box_key pattern is one, on every transport (SPEC §12),
	// before any backend sees it (with a single key, stdio's backend leaves the box to the
	// server, and the schema would call it INVALID_ARGUMENT).
	if k := args["box_key"]; len(k) > 0 && k[0] == '"' {
		var boxKey string
		if err := json.Unmarshal(k, &boxKey); err == nil {
			if !boxkey.Valid(boxKey) {
				return nil, apierr.Auth()
			}
			if err := sf.backend.CheckBox(ctx, req, boxKey); err != nil {
				return nil, err
			}
		}
	}
	// One bound on a call's arguments whatever the transport: the HTTP API's body bound (over
	// stdio the arguments become that body; /mcp's own, larger bound covers the envelope).
	if len(raw) > schema.MaxRequestBytes {
		return nil, apierr.TooLarge("", "request_too_large", schema.MaxRequestBytes)
	}
	if !valid {
		if v := input.Validate(doc); v != nil {
			return nil, apierr.FromViolation(v)
		}
	}
	schema.ClampIntegerMembers(args) // limit 10.0 or 1e30 is clamped, never refused (SPEC §9)
	return args, nil
}

// refused tells a RefusalRecorder backend of a call of op refused before it ran.
func (sf *surface) refused(ctx context.Context, op *genmcp.Operation, e *apierr.Error, start time.Time) {
	if r, ok := sf.backend.(RefusalRecorder); ok && op != nil {
		r.Refused(ctx, op, e, time.Since(start))
	}
}

// wireError turns any failure into the structured error; unexpected ones are logged with
// their cause and reported without it.
func (sf *surface) wireError(ctx context.Context, tool string, err error) *apierr.Error {
	if e, ok := apierr.As(err); ok {
		return e
	}
	var ae *genmcp.ArgumentError
	if errors.As(err, &ae) {
		return apierr.Undecodable(ae.Field)
	}
	if ua, ok := errors.AsType[*UnexpectedAnswerError](err); ok { // as an error answer without Agentbox's body (ReadResponse)
		return apierr.New(apierr.TemporarilyUnavailable, ua.Error()).WithReason(ReasonUnexpectedAnswer)
	}
	sf.log.ErrorContext(ctx, "tool call failed", slog.String("tool", tool), slog.Any("err", err))
	return apierr.Storage()
}

// successResult is structuredContent (the operation's success body) plus its compact JSON
// as the text mirror, for clients on protocol versions before structured output.
func successResult(body json.RawMessage) (*mcp.CallToolResult, error) {
	var buf bytes.Buffer
	if err := json.Compact(&buf, body); err != nil {
		return nil, fmt.Errorf("mcpserver: result is not JSON: %w", err)
	}
	compact := json.RawMessage(buf.Bytes())
	return &mcp.CallToolResult{
		Content:           []mcp.Content{&mcp.TextContent{Text: string(compact)}},
		StructuredContent: compact,
	}, nil
}

// errorResult is an expected failure: isError, a one-line summary, structuredContent.error.
func errorResult(e *apierr.Error) *mcp.CallToolResult {
	return &mcp.CallToolResult{
		IsError:           true,
		Content:           []mcp.Content{&mcp.TextContent{Text: Summary(e)}},
		StructuredContent: apierr.Body{Error: e},
	}
}

// Summary is the one-line text of an error result: code, message and every detail field a
// model needs to correct itself (never the rejected value: messages never hold one).
func Summary(e *apierr.Error) string {
	var b strings.Builder
	b.WriteString(string(e.Code) + ": " + e.Message)
	if e.Reason != "" {
		b.WriteString("; reason " + e.Reason)
	}
	if e.Field != "" {
		b.WriteString("; field " + e.Field)
	}
	if e.Limit != nil {
		fmt.Fprintf(&b, "; limit %d", *e.Limit)
	}
	if e.CurrentRevision != nil {
		b.WriteString("; current_revision " + *e.CurrentRevision)
	}
	if e.SettingsRevision != nil {
		b.WriteString("; settings_revision " + *e.SettingsRevision)
	}
	if e.RetryAfterSeconds != nil {
		fmt.Fprintf(&b, "; retry after %d s", *e.RetryAfterSeconds)
	}
	if e.Retryable {
		b.WriteString("; retryable with the same idempotency_key")
	}
	if e.SuggestedAction != "" {
		b.WriteString("; next: " + e.SuggestedAction)
	}
	return strings.ReplaceAll(b.String(), "\n", " ")
}

// advertisedInput is the inputSchema of tools/list: the operation's closed input schema
// without "$schema" (MCP's default dialect is JSON Schema 2020-12; the document is the
// same, minus 52 bytes a tool in every client's context).
func advertisedInput(closed json.RawMessage) json.RawMessage {
	doc := schemaObject(closed)
	delete(doc, "$schema")
	return mustMarshal(doc)
}

// advertisedOutput is the outputSchema of tools/list: the operation's open output schema
// (without "$schema"), widened to also admit the {"error": {...}} object of an isError
// result, because clients validate structuredContent against outputSchema even on error
// results (the official TypeScript SDK 1.x does) and would otherwise turn a correctable
// tool error into a client-side failure the model never sees.
func advertisedOutput(open json.RawMessage) json.RawMessage {
	doc := schemaObject(open)
	delete(doc, "$schema")
	// A plain object schema admits the error object by making only its required list
	// the alternative: {…properties, anyOf: [{required: [fields]}, {required: [error]}]}
	// accepts exactly what the wrapped form below accepts, in fewer bytes.
	plain := true
	for k := range doc {
		switch k {
		case "type", "additionalProperties", "properties", "required", "description":
		default:
			plain = false
		}
	}
	if req, ok := doc["required"]; ok && plain && string(doc["type"]) == `"object"` {
		delete(doc, "required")
		doc["anyOf"] = json.RawMessage(`[{"required":` + string(req) + `},{"required":["error"]}]`)
		return mustMarshal(doc)
	}
	return mustMarshal(map[string]json.RawMessage{
		"type":                 json.RawMessage(`"object"`),
		"additionalProperties": json.RawMessage(`true`),
		"anyOf":                json.RawMessage(`[` + string(mustMarshal(doc)) + `,{"required":["error"]}]`),
	})
}

func schemaObject(raw json.RawMessage) map[string]json.RawMessage {
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(raw, &doc); err != nil {
		panic("mcpserver: a registry schema is not a JSON object: " + err.Error())
	}
	return doc
}

// Marshal is compact JSON without HTML escaping (as the SDK writes every MCP message), map
// keys sorted.
func Marshal(v any) (json.RawMessage, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// mustMarshal is Marshal for the registry's own schema documents.
func mustMarshal(v any) json.RawMessage {
	b, err := Marshal(v)
	if err != nil {
		panic("mcpserver: " + err.Error())
	}
	return b
}

// Contract is what a tool advertises: its closed input schema and its open output schema
// (as in tools/list). The CLI prints them for --input-schema and --output-schema.
func Contract(t *genmcp.Tool) (inputSchema, outputSchema json.RawMessage) {
	e := (&surface{}).entry(t)
	strict := t.OutputSchema
	if !isRouterTool(t) {
		strict = genmcp.Operations[t.OperationID].OutputSchema
	}
	return e.inputSchema, advertisedOutput(openSchema(strict))
}

// openSchema is a strict output schema opened at every object node (SPEC §1: advertised
// output schemas are open, so additive changes do not break cached clients) and otherwise
// whole: tools/list advertises only the top level of each result (its byte budget), and
// this is where a model or a client finds the shape of an inbox row or a request.
func openSchema(strict json.RawMessage) json.RawMessage {
	var doc any
	if err := json.Unmarshal(strict, &doc); err != nil {
		panic("mcpserver: an output schema in the registry is not JSON: " + err.Error())
	}
	var open func(node any)
	open = func(node any) {
		switch n := node.(type) {
		case map[string]any:
			if n["additionalProperties"] == false {
				n["additionalProperties"] = true
			}
			if alts, ok := n["oneOf"]; ok { // opened branches may overlap: any one admits the value
				delete(n, "oneOf")
				n["anyOf"] = alts
			}
			for k, v := range n {
				if k == "enum" || k == "const" || k == "required" || k == "default" || k == "examples" {
					continue // values, not schemas
				}
				open(v)
			}
		case []any:
			for _, v := range n {
				open(v)
			}
		}
	}
	open(doc)
	return mustMarshal(doc)
}

// Invoke runs one registry tool (canonical name or alias) outside MCP, exactly as a
// tools/call would: the agent CLI uses it with a Forwarder. It returns the success body,
// or an error (*apierr.Error for every expected failure).
func Invoke(ctx context.Context, b Backend, name string, args json.RawMessage, log *slog.Logger) (json.RawMessage, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	sf := &surface{backend: b, log: log}
	t, ok := genmcp.LookupTool(name)
	if !ok {
		return nil, fmt.Errorf("no tool %q", name)
	}
	body, fail := sf.entry(t).call(ctx, nil, args)
	if fail != nil {
		return nil, fail
	}
	return body, nil
}

// CheckArguments runs the argument checks Invoke runs before calling the tool (the same code
// as an MCP call: AUTH_FAILED for a box without a key, then the input schema), calling
// nothing, so a caller can refuse a call that would not be sent before it says anything about
// sending it.
func CheckArguments(ctx context.Context, b Backend, name string, args json.RawMessage) error {
	t, ok := genmcp.LookupTool(name)
	if !ok {
		return fmt.Errorf("no tool %q", name)
	}
	sf := &surface{backend: b, log: slog.New(slog.DiscardHandler)}
	if _, err := sf.arguments(ctx, nil, sf.entry(t).input, args); err != nil {
		return sf.wireError(ctx, name, err)
	}
	return nil
}

// WarnOnly is l without its debug and info records: the SDK logs every stateless request's
// session lifecycle at info level.
func WarnOnly(l *slog.Logger) *slog.Logger {
	return slog.New(warnHandler{l.Handler()})
}

type warnHandler struct{ slog.Handler }

func (h warnHandler) Enabled(ctx context.Context, level slog.Level) bool {
	return level >= slog.LevelWarn && h.Handler.Enabled(ctx, level)
}

func (h warnHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return warnHandler{h.Handler.WithAttrs(attrs)}
}

func (h warnHandler) WithGroup(name string) slog.Handler {
	return warnHandler{h.Handler.WithGroup(name)}
}
