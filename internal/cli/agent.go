package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/big"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	genmcp "github.com/agentbox/agentbox/gen/mcp"
	"github.com/agentbox/agentbox/internal/apierr"
	"github.com/agentbox/agentbox/internal/mcpserver"
)

// Agent commands are generated from the tool registry (SPEC §13.4): `agentbox <domain>
// <verb>` for every tool (its registry cli route; an alias works with its words, e.g.
// `agentbox rooms list`, or by name). Input is a JSON object from --input, or stdin with
// `-` (or --input -), plus a flag for every top-level field (flags win): scalars (--room-id
// X), arrays of scalars as repeatable flags (--inbox-seqs 3 --inbox-seqs 4), objects and
// other arrays as JSON (--checkpoint '{…}'). Fields naming agents (…agent_id, …agent_ids)
// take an agent ID or the name of a listed agent, resolved through the directory; a tool may
// add flags of its own (toolFlags: --to NAME for message send). --box sets box_key (default
// AGENTBOX_BOX). A write without an idempotency_key gets a generated one, printed on stderr
// so the user can retry with it (not for a dry run: it writes nothing). The call goes to the HTTP API through gen/client with
// AGENTBOX_API_KEY or the AGENTBOX_CREDENTIALS entry of the box, and Agentbox-Session set
// only when AGENTBOX_SESSION is (otherwise the key's session lane). Arguments are checked
// locally exactly as over MCP. JSON on stdout (inbox rows' reasons also as reason_names),
// diagnostics on stderr, exit code per class.

// agentRoutes maps a command (its words joined by spaces) to its tool.
var agentRoutes = func() map[string]*genmcp.Tool {
	routes := map[string]*genmcp.Tool{}
	for _, t := range genmcp.Tools {
		routes[t.CLI] = t
		routes[t.Name] = t
		for _, a := range t.Aliases {
			routes[a] = t
			routes[strings.ReplaceAll(a, "_", " ")] = t
		}
	}
	return routes
}()

// findTool matches the longest command (up to three words) at the start of args.
func findTool(args []string) (*genmcp.Tool, []string, bool) {
	for n := min(3, len(args)); n >= 1; n-- {
		words := args[:n]
		if strings.HasPrefix(words[n-1], "-") {
			continue
		}
		if t, ok := agentRoutes[strings.Join(words, " ")]; ok {
			return t, args[n:], true
		}
	}
	return nil, nil, false
}

// agent runs a registry tool, or lists a domain's commands (`agentbox inbox --help`); ok is
// false when args name neither.
func (e *env) agent(args []string) (ok bool, err error) {
	if args[0] == "tools" {
		return true, e.listTools()
	}
	t, rest, ok := findTool(args)
	if !ok {
		if domain := domainTools(args[0]); len(domain) > 0 && len(args) > 1 && isHelp(args[1]) {
			fmt.Fprintf(e.stdout, "usage: agentbox %s <verb> [flags]\n\n", args[0])
			commandList(e.stdout, fmt.Sprintf("%s commands (agentbox %s <verb> --help for each):", args[0], args[0]), domain)
			return true, nil
		}
		return false, nil
	}
	return true, e.runTool(t, rest)
}

func (e *env) listTools() error {
	all := map[string]string{}
	for _, t := range genmcp.Tools {
		all[t.CLI] = t.Title
	}
	commandList(e.stdout, "agent commands (agentbox <command> --help for each):", all)
	return nil
}

// domainTools are the commands of a domain (`inbox` → inbox ack, inbox claim, inbox list)
// with their titles; empty for a word that is no domain. A one-word command (prime) is a
// command, not a domain.
func domainTools(domain string) map[string]string {
	commands := map[string]string{}
	for _, t := range genmcp.Tools {
		if first, _, ok := strings.Cut(t.CLI, " "); ok && first == domain {
			commands[t.CLI] = t.Title
		}
	}
	return commands
}

func (e *env) runTool(t *genmcp.Tool, args []string) error {
	inputSchema, outputSchema := mcpserver.Contract(t)
	fields, required, err := inputFields(inputSchema)
	if err != nil {
		return err
	}
	fs := flag.NewFlagSet("agentbox "+t.CLI, flag.ContinueOnError)
	input := fs.String("input", "", "the arguments as a JSON object; - reads them from stdin")
	box := fs.String("box", os.Getenv("AGENTBOX_BOX"), "box_key")
	showIn := fs.Bool("input-schema", false, "print the input schema and exit")
	showOut := fs.Bool("output-schema", false, "print the output schema and exit")
	notes := map[string]string{"box": "or AGENTBOX_BOX"}
	var requiredFlags []string
	if required["box_key"] {
		requiredFlags = append(requiredFlags, "box")
	}
	flags := map[string]*fieldFlag{}
	for _, f := range fields {
		ff := &fieldFlag{field: f}
		flags[f.name] = ff
		fs.Var(ff, f.flag(), f.help())
		if required[f.name] {
			requiredFlags = append(requiredFlags, f.flag())
		}
		notes[f.flag()] = f.note()
	}
	var extras []applyFlags
	for _, add := range toolFlags[t.Name] {
		extras = append(extras, add(fs, notes))
	}
	if attachOps[t.Name] { // taken off the command line before (attachmentCommand); listed here
		fs.Func("attach", "upload the local file `PATH` as the message's attachment (multipart over HTTP; the media type from its extension, "+
			"application/octet-stream when unknown; the body may then be empty)", func(path string) error { e.attach = path; return nil })
	}
	usage := fmt.Sprintf("usage: agentbox %s [flags] [-]\n\n%s: %s\n\nThe arguments come from --input (a JSON object; - or a lone - reads stdin) and the flags below, which win.",
		t.CLI, t.Title, t.Description)
	if err := parseArgs(fs, args, usage, requiredFlags, notes); err != nil {
		return err
	}
	switch {
	case *showIn:
		return writeIndented(e.stdout, inputSchema)
	case *showOut:
		return writeIndented(e.stdout, withReasonNamesSchema(outputSchema))
	}
	stdin := *input == "-"
	for i, a := range fs.Args() {
		if a != "-" {
			return usagef("unexpected argument: the %s argument after the flags is neither a flag nor - (use --input, - for stdin, or field flags; agentbox %s --help)", ordinal(i+1), t.CLI)
		}
		stdin = true
	}
	raw := []byte(*input)
	if stdin {
		if raw, err = io.ReadAll(e.stdin); err != nil {
			return err
		}
	}
	if err := checkText(raw); err != nil { // named as in the input (text.go)
		return err
	}
	given := map[string]json.RawMessage{}
	if len(bytes.TrimSpace(raw)) > 0 {
		// Decoded loosely only to merge; the strict check (UTF-8, unknown fields, types)
		// runs on the merged object exactly as for an MCP call.
		if err := json.Unmarshal(raw, &given); err != nil || given == nil {
			return usagef("the input must be a JSON object")
		}
	}
	explicitBox := false
	fs.Visit(func(f *flag.Flag) { explicitBox = explicitBox || f.Name == "box" })
	boxKey := *box
	if b, ok := given["box_key"]; ok && !explicitBox {
		json.Unmarshal(b, &boxKey) //nolint:errcheck // the strict check reports a wrong type
	}
	generatedKey := ""
	if ff, hasKey := flags["idempotency_key"]; hasKey && given["idempotency_key"] == nil && len(ff.values) == 0 {
		generatedKey = mcpserver.NewSessionKey("cli-")[:20]
	}
	// arguments builds the call's arguments from the input and the flags (flags win); agent
	// names are resolved through c's directory lookups, or kept as typed without a forwarder.
	arguments := func(c *toolCall) (json.RawMessage, error) {
		set := map[string]json.RawMessage{}
		for name, ff := range flags {
			if len(ff.values) == 0 {
				continue
			}
			var err error
			if set[name], err = ff.value(c); err != nil {
				return nil, err
			}
		}
		for _, apply := range extras {
			if err := apply(set, c); err != nil {
				return nil, err
			}
		}
		if generatedKey != "" {
			set["idempotency_key"] = jsonString(generatedKey)
		}
		return mergeArguments(raw, given, set, *box, explicitBox)
	}
	// The arguments as typed carry text the server cannot store exactly where the server
	// would find it: refused here, before anything is sent (name lookups included).
	typed, err := arguments(&toolCall{box: boxKey})
	if err != nil {
		return err
	}
	if err := checkText(typed); err != nil {
		return err
	}
	if e.attach != "" { // a file that cannot be sent fails before any key is printed or anything is sent
		if _, err := attachName(e.attach); err != nil {
			return err
		}
		if st, err := os.Stat(e.attach); err != nil {
			return usagef("--attach: %v", err)
		} else if !st.Mode().IsRegular() {
			return usagef("--attach must name a regular file")
		}
	}
	creds, err := mcpserver.CredentialsFromEnv(os.Getenv)
	if err != nil {
		return usageError{err.Error()}
	}
	session, err := mcpserver.SessionFromEnv(os.Getenv)
	if err != nil {
		return usageError{err.Error()}
	}
	server, shown, err := serverBase()
	if err != nil {
		return err
	}
	l := newLink(shown)
	f, err := mcpserver.NewForwarder(server, creds, session, l.httpClient(callTimeout))
	if err != nil {
		return err
	}
	ctx := context.Background()
	call := &toolCall{ctx: ctx, f: f, box: boxKey, stderr: e.stderr}
	argsJSON, err := arguments(call)
	if err != nil {
		return l.explain(err, "nothing was changed (an agent name was being looked up); repeat the command")
	}
	if e.attach == "" { // arguments refused here are never sent: no key is offered for them
		if err := mcpserver.CheckArguments(ctx, f, t.Name, argsJSON); err != nil {
			return err
		}
	}
	if generatedKey != "" && !dryRun(argsJSON) { // a dry run writes nothing: nothing to retry (SPEC §10)
		fmt.Fprintf(e.stderr, "agentbox: idempotency key %s (generated); to retry this write safely, repeat it with --idempotency-key %s\n", generatedKey, generatedKey)
	}
	if e.attach != "" { // a send with a local file: multipart over HTTP, checked by the server (attach.go)
		return e.sendWithAttachment(t, argsJSON)
	}
	body, err := mcpserver.Invoke(ctx, f, t.Name, argsJSON, nil)
	if ae, ok := apierr.As(err); ok && ae.Reason == mcpserver.ReasonUnexpectedAnswer { // exit 1, as for an error answer that is not Agentbox's
		return fmt.Errorf("%s; %s", ae.Message, afterLostCall(t, argsJSON))
	}
	if err != nil {
		return l.explain(err, afterLostCall(t, argsJSON))
	}
	return writeIndented(e.stdout, withReasonNames(body))
}

// callTimeout bounds each HTTP call of an agent command (as mcpserver's forwarder does):
// every operation answers promptly.
const callTimeout = time.Minute

// afterLostCall says what repeating a call does when its request went out but no answer
// came back (SPEC §12: a write's outcome is then unknown; its idempotency key makes the
// repeat safe and returns the original result).
func afterLostCall(t *genmcp.Tool, args json.RawMessage) string {
	var in map[string]json.RawMessage
	json.Unmarshal(args, &in) //nolint:errcheck // checked before the call
	switch repeat, key := mcpserver.RepeatOf(t, in); repeat {
	case mcpserver.RepeatChangesNothing:
		return "nothing was changed; repeat the command"
	case mcpserver.RepeatWithKey:
		return fmt.Sprintf("the write may or may not have been applied: repeat it with --idempotency-key %s, which applies it at most once and answers with its result", key)
	case mcpserver.RepeatIsSafe:
		return "the call may or may not have taken effect; repeating it is safe"
	}
	return "the call may or may not have taken effect"
}

// dryRun: the call's arguments have dry_run true (SPEC §10: it validates only, writes
// nothing and records no idempotency entry).
func dryRun(args json.RawMessage) bool {
	var in struct {
		DryRun bool `json:"dry_run"`
	}
	json.Unmarshal(args, &in) //nolint:errcheck // checked before the call
	return in.DryRun
}

// mergeArguments combines the JSON input with field flags and the box: flags win; the
// default box (AGENTBOX_BOX) only fills a missing box_key, an explicit --box replaces it.
func mergeArguments(raw []byte, given, set map[string]json.RawMessage, box string, explicitBox bool) (json.RawMessage, error) {
	args := make(map[string]json.RawMessage, len(given)+len(set)+1)
	for k, v := range given {
		args[k] = v
	}
	for k, v := range set {
		args[k] = v
	}
	boxSet := false
	if _, inInput := args["box_key"]; box != "" && (explicitBox || !inInput) {
		args["box_key"] = jsonString(box)
		boxSet = true
	}
	if len(args) == 0 {
		return json.RawMessage(`{}`), nil
	}
	if len(set) == 0 && !boxSet {
		return raw, nil // forwarded byte for byte, so the strict decoder sees what was typed
	}
	return json.Marshal(args)
}

// field is one top-level input field with its own flag.
type field struct {
	name, description string
	kind              fieldKind
	typ               string // scalar type, or the item type of a list
	allowed           []any  // the schema's enum, if any
	def               any    // the schema's default, if any
}

type fieldKind int

const (
	scalarField fieldKind = iota // string, integer, number, boolean
	listField                    // an array of scalars: a repeatable flag
	jsonField                    // an object or another array: one JSON value
)

func (f field) flag() string { return strings.ReplaceAll(f.name, "_", "-") }

// namesAgents: the field holds agent IDs, which the CLI also accepts as listed names.
func (f field) namesAgents() bool {
	return f.typ == "string" && (strings.HasSuffix(f.name, "agent_id") || strings.HasSuffix(f.name, "agent_ids"))
}

func (f field) help() string {
	d := f.description
	if i := strings.IndexAny(d, "\n"); i >= 0 {
		d = d[:i]
	}
	if len(f.allowed) > 0 {
		vals := make([]string, len(f.allowed))
		for i, v := range f.allowed {
			vals[i] = fmt.Sprint(v)
		}
		d = strings.TrimSpace(d + " One of: " + strings.Join(vals, ", ") + ".")
	}
	return d
}

func (f field) note() string {
	var parts []string
	switch f.kind {
	case listField:
		parts = append(parts, "repeatable")
	}
	if f.namesAgents() {
		parts = append(parts, "agent ID or listed agent name")
	}
	if f.name == "idempotency_key" {
		parts = append(parts, "generated and printed on stderr when omitted")
	}
	if f.def != nil {
		parts = append(parts, fmt.Sprintf("default %v", f.def))
	}
	return strings.Join(parts, "; ")
}

// inputFields lists the top-level properties of an input schema (box_key has --box) and
// the required ones.
func inputFields(inputSchema json.RawMessage) ([]field, map[string]bool, error) {
	var s struct {
		Required   []string `json:"required"`
		Properties map[string]struct {
			Type        any    `json:"type"`
			Description string `json:"description"`
			Enum        []any  `json:"enum"`
			Default     any    `json:"default"`
			Items       struct {
				Type any `json:"type"`
			} `json:"items"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(inputSchema, &s); err != nil {
		return nil, nil, err
	}
	required := map[string]bool{}
	for _, r := range s.Required {
		required[r] = true
	}
	var out []field
	for name, p := range s.Properties {
		if name == "box_key" {
			continue
		}
		typ, _ := p.Type.(string)
		item, _ := p.Items.Type.(string)
		f := field{name: name, description: p.Description, typ: typ, allowed: p.Enum, def: p.Default}
		switch {
		case isScalar(typ):
		case typ == "array" && isScalar(item):
			f.kind, f.typ = listField, item
		default:
			f.kind = jsonField
		}
		out = append(out, f)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out, required, nil
}

func isScalar(typ string) bool {
	return typ == "string" || typ == "integer" || typ == "number" || typ == "boolean"
}

// fieldFlag collects a field's flag values; value turns them into the field's JSON.
type fieldFlag struct {
	field
	values []string
}

func (f *fieldFlag) String() string { return "" }

func (f *fieldFlag) typeName() string {
	switch {
	case f.kind == jsonField:
		return "JSON"
	case f.typ == "boolean":
		return ""
	}
	return f.typ
}

func (f *fieldFlag) IsBoolFlag() bool { return f.kind == scalarField && f.typ == "boolean" }

// Set checks each value as it comes, so the error names the flag.
func (f *fieldFlag) Set(v string) error {
	if f.kind == jsonField {
		if !json.Valid([]byte(v)) {
			return fmt.Errorf("not valid JSON")
		}
	} else if _, err := scalarJSON(f.typ, v); err != nil {
		return err
	}
	if f.kind == listField {
		f.values = append(f.values, v)
	} else {
		f.values = []string{v} // the last one wins
	}
	return nil
}

func (f *fieldFlag) value(c *toolCall) (json.RawMessage, error) {
	vals := f.values
	if f.namesAgents() {
		vals = make([]string, len(f.values))
		for i, v := range f.values {
			at := f.name // the field the server would name for this value
			if f.kind == listField {
				at = fmt.Sprintf("%s[%d]", f.name, i)
			}
			id, err := c.agentID(v, at)
			if err != nil {
				return nil, err
			}
			vals[i] = id
		}
	}
	switch f.kind {
	case jsonField:
		return json.RawMessage(vals[0]), nil
	case listField:
		items := make([]json.RawMessage, len(vals))
		for i, v := range vals {
			items[i], _ = scalarJSON(f.typ, v)
		}
		return json.Marshal(items)
	default:
		return scalarJSON(f.typ, vals[0])
	}
}

func scalarJSON(typ, v string) (json.RawMessage, error) {
	switch typ {
	case "integer":
		// Any decimal integer (a sign, digits), sent in its JSON form (007 and +5 as 7 and
		// 5): its range is the shared argument check's to judge, as for an MCP call (limit
		// and lease_seconds are clamped, SPEC §9; another field's error names it).
		n, ok := new(big.Int).SetString(v, 10)
		if !ok {
			return nil, fmt.Errorf("not an integer")
		}
		return json.RawMessage(n.String()), nil
	case "number":
		if _, err := strconv.ParseFloat(v, 64); err != nil || !json.Valid([]byte(v)) {
			return nil, fmt.Errorf("not a number")
		}
		return json.RawMessage(v), nil
	case "boolean":
		b, err := strconv.ParseBool(v)
		if err != nil {
			return nil, fmt.Errorf("not a boolean")
		}
		return json.RawMessage(strconv.FormatBool(b)), nil
	default:
		return jsonString(v), nil
	}
}

// writeIndented prints a JSON document indented, with a final newline.
func writeIndented(w io.Writer, doc json.RawMessage) error {
	var buf bytes.Buffer
	if err := json.Indent(&buf, doc, "", "  "); err != nil {
		return err
	}
	// json.Indent keeps the document's trailing newline, if any: one line ending, always.
	out := append(bytes.TrimRight(buf.Bytes(), " \t\r\n"), '\n')
	_, err := w.Write(out)
	return err
}
