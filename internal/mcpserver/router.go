package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strings"
	"unicode"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	genmcp "github.com/agentbox/agentbox/gen/mcp"
	"github.com/agentbox/agentbox/internal/apierr"
	"github.com/agentbox/agentbox/internal/schema"
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

// routerSearchLimit bounds tool_search results when the caller gives no limit.
const routerSearchLimit = 5

func (sf *surface) routerEntry(t *genmcp.Tool) *entry {
	c := routerContractOf(t)
	e := &entry{sf: sf, tool: t, input: c.input, inputSchema: c.inputSchema, outputSchema: advertisedOutput(c.advertisedOutput)}
	var run func(context.Context, *mcp.CallToolRequest, map[string]json.RawMessage) (any, error)
	switch t.Name {
	case "tool_search":
		run = sf.toolSearch
	case "tool_describe":
		run = sf.toolDescribe
	case "tool_execute":
		// Its result is the executed tool's result, passed through as that tool produced it.
		e.run = sf.toolExecute
		return e
	default:
		panic(fmt.Sprintf("mcpserver: router tool %s has no implementation", t.Name))
	}
	e.run = func(ctx context.Context, req *mcp.CallToolRequest, args map[string]json.RawMessage) (json.RawMessage, error) {
		res, err := run(ctx, req, args)
		if err != nil {
			return nil, err
		}
		body, err := Marshal(res)
		if err != nil {
			return nil, err
		}
		if c.output != nil {
			if v := c.output.ValidateJSON(body); v != nil {
				return nil, fmt.Errorf("%s result violates its output schema at %q: %s", t.Name, v.Field, v.Message)
			}
		}
		return body, nil
	}
	return e
}

// executable finds the registry tool tool_execute may run: any tool with an operation,
// by canonical name or alias (whatever its exposure: the key's authority is unchanged).
func executable(name string) (*genmcp.Tool, *genmcp.Operation, error) {
	t, ok := genmcp.LookupTool(name)
	if !ok || isRouterTool(t) {
		return nil, nil, apierr.Invalid("name", "no tool of that name can be executed; find one with tool_search").WithReason("unknown_tool")
	}
	return t, genmcp.Operations[t.OperationID], nil
}

func (sf *surface) toolExecute(ctx context.Context, req *mcp.CallToolRequest, args map[string]json.RawMessage) (json.RawMessage, error) {
	var name string
	json.Unmarshal(args["name"], &name) //nolint:errcheck // validated by the input schema
	t, op, err := executable(name)
	if err != nil {
		return nil, err
	}
	inner := args["arguments"]
	if len(inner) == 0 {
		inner = json.RawMessage(`{}`)
	}
	// The executed tool's box_key defaults to the router call's (already checked) box_key.
	var obj map[string]json.RawMessage
	if json.Unmarshal(inner, &obj) == nil && obj != nil {
		if _, ok := obj["box_key"]; !ok {
			obj["box_key"] = args["box_key"]
			inner, _ = Marshal(obj)
		}
	}
	innerArgs, err := sf.arguments(ctx, req, op.Input, inner)
	if err != nil {
		if e, ok := apierr.As(err); ok && e.Field != "" {
			e.Field = "arguments." + e.Field
		} else if ok && e.Code == apierr.InvalidArgument {
			e.Field = "arguments"
		}
		return nil, err
	}
	_ = t
	return sf.backend.Call(ctx, req, op, innerArgs)
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

// toolDescription is tool_describe's result: the full contract of one tool.
type toolDescription struct {
	Name         string          `json:"name"`
	Title        string          `json:"title"`
	Description  string          `json:"description"`
	Annotations  toolAnnotations `json:"annotations"`
	InputSchema  json.RawMessage `json:"input_schema"`
	OutputSchema json.RawMessage `json:"output_schema"`
}

type toolAnnotations struct {
	ReadOnlyHint    bool `json:"readOnlyHint"`
	DestructiveHint bool `json:"destructiveHint"`
	IdempotentHint  bool `json:"idempotentHint"`
	OpenWorldHint   bool `json:"openWorldHint"`
}

func (sf *surface) toolDescribe(_ context.Context, _ *mcp.CallToolRequest, args map[string]json.RawMessage) (any, error) {
	var name string
	json.Unmarshal(args["name"], &name) //nolint:errcheck // validated by the input schema
	t, op, err := executable(name)
	if err != nil {
		return nil, err
	}
	a := t.Annotations
	return toolDescription{Name: t.Name, Title: t.Title, Description: t.Description,
		Annotations:  toolAnnotations{a.ReadOnlyHint, a.DestructiveHint, a.IdempotentHint, a.OpenWorldHint},
		InputSchema:  op.InputSchema,
		OutputSchema: op.AdvertisedOutputSchema}, nil
}

// rankTools orders the executable tools by a small lexical score of the query against
// name (weight 3), title (2) and description (1), each query term weighted by its rarity
// across the registry; ties keep registry order. Deterministic.
func rankTools(query string) []*genmcp.Tool {
	var tools []*genmcp.Tool
	for _, t := range genmcp.Tools {
		if !isRouterTool(t) {
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
	out := make([]*genmcp.Tool, len(idx))
	for i, j := range idx {
		out[i] = tools[j]
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

// routerContract is a router tool's inline contract from the registry.
type routerContract struct {
	input            *schema.Validator
	output           *schema.Validator // strict; nil when the registry gives none
	inputSchema      json.RawMessage
	advertisedOutput json.RawMessage
}
