package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"

	genmcp "github.com/agentbox/agentbox/gen/mcp"
	"github.com/agentbox/agentbox/internal/mcpserver"
)

// Agent commands are generated from the tool registry (SPEC §13.4): `agentbox <domain>
// <verb>` for every tool (its registry cli route; an alias works with its words, e.g.
// `agentbox rooms list`, or by name). Input is a JSON object from --input, or stdin with
// `-` (or --input -), plus flags for top-level scalar fields (--room-id X); --box sets
// box_key (default AGENTBOX_BOX). The call goes to the HTTP API through gen/client with
// AGENTBOX_API_KEY or the AGENTBOX_CREDENTIALS entry of the box, and Agentbox-Session set
// only when AGENTBOX_SESSION is (otherwise the key's session lane). Arguments are checked
// locally exactly as over MCP. JSON on stdout, diagnostics on stderr, exit code per class.

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

// agent runs a registry tool; ok is false when args name none.
func (e *env) agent(args []string) (ok bool, err error) {
	if args[0] == "tools" {
		return true, e.listTools()
	}
	t, rest, ok := findTool(args)
	if !ok {
		return false, nil
	}
	return true, e.runTool(t, rest)
}

func (e *env) listTools() error {
	var lines []string
	for _, t := range genmcp.Tools {
		lines = append(lines, fmt.Sprintf("  %-28s %s", t.CLI, t.Title))
	}
	sort.Strings(lines)
	fmt.Fprintf(e.stdout, "agent commands (agentbox <command> --help for each):\n%s\n", strings.Join(lines, "\n"))
	return nil
}

func (e *env) runTool(t *genmcp.Tool, args []string) error {
	inputSchema, outputSchema := mcpserver.Contract(t)
	fields, err := scalarFields(inputSchema)
	if err != nil {
		return err
	}
	fs := flag.NewFlagSet("agentbox "+t.CLI, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	input := fs.String("input", "", "the arguments as a JSON object; - reads them from stdin")
	box := fs.String("box", os.Getenv("AGENTBOX_BOX"), "box_key (default AGENTBOX_BOX)")
	showIn := fs.Bool("input-schema", false, "print the input schema and exit")
	showOut := fs.Bool("output-schema", false, "print the output schema and exit")
	set := map[string]json.RawMessage{}
	for _, f := range fields {
		fs.Var(&fieldFlag{name: f.name, typ: f.typ, into: set}, f.flag(), f.help())
	}
	fs.Usage = func() {
		fmt.Fprintf(e.stderr, "usage: agentbox %s [flags] [-]\n\n%s: %s\n\nflags:\n", t.CLI, t.Title, t.Description)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return nil
		}
		return usageError{err.Error()}
	}
	switch {
	case *showIn:
		return writeIndented(e.stdout, inputSchema)
	case *showOut:
		return writeIndented(e.stdout, outputSchema)
	}
	stdin := *input == "-"
	for _, a := range fs.Args() {
		if a != "-" {
			return usagef("unexpected argument %q (use --input, - for stdin, or field flags)", a)
		}
		stdin = true
	}
	raw := []byte(*input)
	if stdin {
		if raw, err = io.ReadAll(e.stdin); err != nil {
			return err
		}
	}
	explicitBox := false
	fs.Visit(func(f *flag.Flag) { explicitBox = explicitBox || f.Name == "box" })
	argsJSON, err := mergeArguments(raw, set, *box, explicitBox)
	if err != nil {
		return err
	}
	if e.attach != "" { // a send with a local file: multipart over HTTP, checked by the server (attach.go)
		return e.sendWithAttachment(t, argsJSON)
	}
	creds, err := mcpserver.CredentialsFromEnv(os.Getenv)
	if err != nil {
		return usageError{err.Error()}
	}
	f, err := mcpserver.NewForwarder(serverURL(), creds, os.Getenv("AGENTBOX_SESSION"), nil)
	if err != nil {
		return err
	}
	body, err := mcpserver.Invoke(context.Background(), f, t.Name, argsJSON, nil)
	if err != nil {
		return err
	}
	return writeIndented(e.stdout, body)
}

// mergeArguments combines the JSON input with field flags and the box: flags win; the
// default box (AGENTBOX_BOX) only fills a missing box_key, an explicit --box replaces it.
func mergeArguments(raw []byte, set map[string]json.RawMessage, box string, explicitBox bool) (json.RawMessage, error) {
	args := map[string]json.RawMessage{}
	if len(bytes.TrimSpace(raw)) > 0 {
		// Decoded loosely only to merge; the strict check (UTF-8, unknown fields, types)
		// runs on the merged object exactly as for an MCP call.
		if err := json.Unmarshal(raw, &args); err != nil || args == nil {
			return nil, usagef("the input must be a JSON object")
		}
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

// field is one top-level scalar input field that gets its own flag.
type field struct {
	name, typ, description string
}

func (f field) flag() string { return strings.ReplaceAll(f.name, "_", "-") }

func (f field) help() string {
	d := f.description
	if i := strings.IndexAny(d, "\n"); i >= 0 {
		d = d[:i]
	}
	return fmt.Sprintf("%s (%s) %s", f.name, f.typ, d)
}

// scalarFields lists the top-level string, integer, number and boolean properties of an
// input schema (box_key has --box).
func scalarFields(inputSchema json.RawMessage) ([]field, error) {
	var s struct {
		Properties map[string]struct {
			Type        any    `json:"type"`
			Description string `json:"description"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(inputSchema, &s); err != nil {
		return nil, err
	}
	var out []field
	for name, p := range s.Properties {
		typ, _ := p.Type.(string)
		switch typ {
		case "string", "integer", "number", "boolean":
			if name != "box_key" {
				out = append(out, field{name: name, typ: typ, description: p.Description})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out, nil
}

// fieldFlag stores a flag value as the field's JSON value.
type fieldFlag struct {
	name, typ string
	into      map[string]json.RawMessage
}

func (f *fieldFlag) String() string { return "" }

func (f *fieldFlag) IsBoolFlag() bool { return f.typ == "boolean" }

func (f *fieldFlag) Set(v string) error {
	switch f.typ {
	case "string":
		f.into[f.name] = jsonString(v)
	case "integer":
		if _, err := strconv.ParseInt(v, 10, 64); err != nil {
			return fmt.Errorf("not an integer")
		}
		f.into[f.name] = json.RawMessage(v)
	case "number":
		if _, err := strconv.ParseFloat(v, 64); err != nil || !json.Valid([]byte(v)) {
			return fmt.Errorf("not a number")
		}
		f.into[f.name] = json.RawMessage(v)
	case "boolean":
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("not a boolean")
		}
		f.into[f.name] = json.RawMessage(strconv.FormatBool(b))
	}
	return nil
}

func jsonString(s string) json.RawMessage {
	b, _ := json.Marshal(s)
	return b
}

// writeIndented prints a JSON document indented, with a final newline.
func writeIndented(w io.Writer, doc json.RawMessage) error {
	var buf bytes.Buffer
	if err := json.Indent(&buf, doc, "", "  "); err != nil {
		return err
	}
	buf.WriteByte('\n')
	_, err := w.Write(buf.Bytes())
	return err
}
