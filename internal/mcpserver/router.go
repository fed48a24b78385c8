package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"
	"unicode"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	genmcp "github.com/agentbox/agentbox/gen/mcp"
	"github.com/agentbox/agentbox/internal/apierr"
)

// Router mode (SPEC §13.2): a router key sees tool_search, tool_describe, tool_execute and
// agent_prime. The router tools have no operation of their own: search and describe read
// the registry, execute runs one registry tool through the same argument checks and the
// same Backend as a direct call, so it never widens the key, never reaches another box
// (CheckBox) and never reaches the admin API (only registry tools with an operation are
// executable). Executing a router tool is refused: no recursion.

// isRouterTool reports a registry tool without an operation (tool_search, tool_describe,
// tool_execute).
func isRouterTool(t *genmcp.Tool) bool { return t.OperationID == "" }

// routerSearchLimit bounds tool_search results when the caller gives no limit: the
// default of its limit input in spec/tool-contracts.json.
var routerSearchLimit = func() int {
	t, ok := genmcp.LookupTool("tool_search")
	var in struct {
		Properties struct {
			Limit struct {
				Default int `json:"default"`
			} `json:"limit"`
		} `json:"properties"`
	}
	if !ok || json.Unmarshal(t.InputSchema, &in) != nil || in.Properties.Limit.Default < 1 {
		panic("mcpserver: tool_search's limit input states no default in spec/tool-contracts.json")
	}
	return in.Properties.Limit.Default
}()

func (sf *surface) routerEntry(t *genmcp.Tool) *entry {
	if t.Input == nil || len(t.AdvertisedOutputSchema) == 0 {
		panic(fmt.Sprintf("mcpserver: router tool %s has no inline schemas in the registry", t.Name))
	}
	var run func(context.Context, *mcp.CallToolRequest, map[string]json.RawMessage) (any, error)
	switch t.Name {
	case "tool_search":
		run = sf.toolSearch
	case "tool_describe":
		run = sf.toolDescribe
	case "tool_execute":
		run = sf.toolExecute
	default:
		panic(fmt.Sprintf("mcpserver: router tool %s has no implementation", t.Name))
	}
	return &entry{sf: sf, tool: t, input: t.Input, inputSchema: advertisedInput(t.InputSchema), outputSchema: advertisedOutput(t.AdvertisedOutputSchema),
		run: func(ctx context.Context, req *mcp.CallToolRequest, args map[string]json.RawMessage) (json.RawMessage, error) {
			res, err := run(ctx, req, args)
			if err != nil {
				return nil, err
			}
			body, err := Marshal(res)
			if err != nil {
				return nil, err
			}
			// Router results are built here, so they are validated here, strictly.
			if v := t.Output.ValidateJSON(body); v != nil {
				return nil, fmt.Errorf("%s result violates its output schema at %q: %s", t.Name, v.Field, v.Message)
			}
			return body, nil
		}}
}

// executable finds a tool the router tools may describe and run: a registry tool with an
// operation and MCP exposure (hidden tools are CLI-only), by canonical name or alias.
func executable(name string) (*genmcp.Tool, *genmcp.Operation, error) {
	t, ok := genmcp.LookupTool(name)
	if !ok || isRouterTool(t) || t.Exposure == "hidden" {
		return nil, nil, apierr.Invalid("name", "no tool of that name can be executed; find one with tool_search").WithReason("unknown_tool")
	}
	return t, genmcp.Operations[t.OperationID], nil
}

func (sf *surface) toolExecute(ctx context.Context, req *mcp.CallToolRequest, args map[string]json.RawMessage) (any, error) {
	var name string
	json.Unmarshal(args["name"], &name) //nolint:errcheck // validated by the input schema
	_, op, err := executable(name)
	if err != nil {
		return nil, err
	}
	// The executed tool's box_key defaults to the router call's (already checked) one.
	var inner map[string]json.RawMessage
	if err := json.Unmarshal(args["arguments"], &inner); err != nil || inner == nil {
		return nil, apierr.Invalid("arguments", "must be a JSON object")
	}
	if _, ok := inner["box_key"]; !ok {
		inner["box_key"] = args["box_key"]
	}
	raw, err := Marshal(inner)
	if err != nil {
		return nil, err
	}
	// The same checks as a direct call: strict decoding, the box, the closed input schema.
	start := time.Now()
	innerArgs, err := sf.arguments(ctx, req, op.Input, raw)
	if err != nil {
		if e, ok := apierr.As(err); ok {
			sf.refused(ctx, op, e, start)
		}
		return nil, underArguments(err)
	}
	body, err := sf.backend.Call(ctx, req, op, innerArgs)
	if err != nil {
		return nil, underArguments(err)
	}
	return map[string]json.RawMessage{"result": body}, nil
}

// underArguments names the field of an executed tool's error as a field of tool_execute's
// own input ("body_md" → "arguments.body_md"), whichever check found it (the schema's, the
// service's limits, idempotency), so a model correcting its call sees one naming scheme. An
// INVALID_ARGUMENT about the arguments as a whole names "arguments".
func underArguments(err error) error {
	e, ok := apierr.As(err)
	if !ok || e.Field == "" && e.Code != apierr.InvalidArgument {
		return err
	}
	renamed := *e // a copy: the error may be shared
	renamed.Field = strings.TrimSuffix("arguments."+e.Field, ".")
	return &renamed
}

// toolSummary is one tool_search hit.
type toolSummary struct {
	Name        string `json:"name"`
	Title       string `json:"title"`
	Description string `json:"description"`
}

func (sf *surface) toolSearch(_ context.Context, _ *mcp.CallToolRequest, args map[string]json.RawMessage) (any, error) {
	var query string
	json.Unmarshal(args["query"], &query) //nolint:errcheck // validated by the input schema
	limit := routerSearchLimit
	if raw, ok := args["limit"]; ok {
		var n int
		if json.Unmarshal(raw, &n) == nil {
			limit = min(max(n, 1), len(genmcp.Tools))
		}
	}
	items := []toolSummary{}
	for _, t := range rankTools(query) {
		if len(items) == limit {
			break
		}
		items = append(items, toolSummary{Name: t.Name, Title: t.Title, Description: t.Description})
	}
	return map[string]any{"items": items}, nil
}

// toolDescription is tool_describe's result: one tool's contract as tools/list would
// advertise it.
type toolDescription struct {
	Name         string          `json:"name"`
	Title        string          `json:"title"`
	Description  string          `json:"description"`
	Annotations  map[string]bool `json:"annotations"`
	InputSchema  json.RawMessage `json:"input_schema"`
	OutputSchema json.RawMessage `json:"output_schema"`
}

func (sf *surface) toolDescribe(_ context.Context, _ *mcp.CallToolRequest, args map[string]json.RawMessage) (any, error) {
	var name string
	json.Unmarshal(args["name"], &name) //nolint:errcheck // validated by the input schema
	t, _, err := executable(name)
	if err != nil {
		return nil, err
	}
	in, out := Contract(t)
	a := t.Annotations
	return toolDescription{Name: t.Name, Title: t.Title, Description: t.Description,
		Annotations: map[string]bool{"readOnlyHint": a.ReadOnlyHint, "destructiveHint": a.DestructiveHint,
			"idempotentHint": a.IdempotentHint, "openWorldHint": a.OpenWorldHint},
		InputSchema: in, OutputSchema: out}, nil
}

// rankTools orders the executable tools by a small lexical score of the query against
// name (weight 3), title (2) and description (1), each query term weighted by its rarity
// across the registry; ties keep registry order; a tool that matches no term is left out.
// Deterministic.
func rankTools(query string) []*genmcp.Tool {
	var tools []*genmcp.Tool
	for _, t := range genmcp.Tools {
		if _, _, err := executable(t.Name); err == nil {
			tools = append(tools, t)
		}
	}
	terms := words(query)
	type doc struct{ name, title, desc map[string]bool }
	docs := make([]doc, len(tools))
	df := map[string]int{}
	for i, t := range tools {
		docs[i] = doc{set(words(strings.ReplaceAll(t.Name, "_", " "))), set(words(t.Title)), set(words(t.Description))}
		seen := map[string]bool{}
		for _, m := range []map[string]bool{docs[i].name, docs[i].title, docs[i].desc} {
			for w := range m {
				if !seen[w] {
					seen[w] = true
					df[w]++
				}
			}
		}
	}
	score := make([]float64, len(tools))
	for i, d := range docs {
		for _, w := range terms {
			idf := math.Log(1 + float64(len(tools))/float64(1+df[w]))
			if d.name[w] {
				score[i] += 3 * idf
			}
			if d.title[w] {
				score[i] += 2 * idf
			}
			if d.desc[w] {
				score[i] += idf
			}
		}
	}
	idx := make([]int, len(tools))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return score[idx[a]] > score[idx[b]] })
	out := make([]*genmcp.Tool, 0, len(idx))
	for _, j := range idx {
		if score[j] == 0 && len(terms) > 0 {
			break // matches no word of the query: not a result (a query of no words lists all)
		}
		out = append(out, tools[j])
	}
	return out
}

// words lowercases text into alphanumeric terms with a crude plural stem.
func words(text string) []string {
	f := strings.FieldsFunc(strings.ToLower(text), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
	for i, w := range f {
		if len(w) > 3 && strings.HasSuffix(w, "s") && !strings.HasSuffix(w, "ss") {
			f[i] = w[:len(w)-1]
		}
	}
	return f
}

func set(ws []string) map[string]bool {
	m := make(map[string]bool, len(ws))
	for _, w := range ws {
		m[w] = true
	}
	return m
}
