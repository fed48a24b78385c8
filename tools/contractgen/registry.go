package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"

	"github.com/agentbox/agentbox/internal/schema"
)

// registry is spec/tool-contracts.json.
type registry struct {
	Server struct {
		Name         string `json:"name"`
		Instructions string `json:"instructions"`
	} `json:"server"`
	Budgets struct {
		ToolsListBytes       int `json:"tools_list_bytes"`
		RouterToolsListBytes int `json:"router_tools_list_bytes"`
	} `json:"budgets"`
	// Defs are schemas router tools share ("$ref": "#/$defs/ToolName").
	Defs  map[string]json.RawMessage `json:"$defs,omitempty"`
	Tools []*toolEntry               `json:"tools"`
}

type toolEntry struct {
	Name            string          `json:"name"`
	OperationID     string          `json:"operation_id"` // "" (null) for router tools
	Title           string          `json:"title"`
	Description     string          `json:"description"`
	Annotations     toolAnnotations `json:"annotations"`
	PermissionClass string          `json:"permission_class"`
	Idempotency     string          `json:"idempotency"`
	Concurrency     string          `json:"concurrency"`
	HiddenContext   []string        `json:"hidden_context"`
	Pagination      string          `json:"pagination"`
	ResultBudget    int             `json:"result_budget_bytes"`
	CLI             string          `json:"cli"`
	Exposure        string          `json:"exposure"`
	Aliases         []string        `json:"aliases"`
	Deprecated      bool            `json:"deprecated"`
	Scenarios       []string        `json:"scenarios"`

	// Router tools (operation_id null, exposure router_only) have no HTTP operation:
	// they state their JSON Schemas inline. Every other tool takes its operation's.
	InputSchema  json.RawMessage `json:"input_schema,omitempty"`
	OutputSchema json.RawMessage `json:"output_schema,omitempty"`

	// The inline schemas as emitted (compact, $schema set): strict input and output,
	// and the advertised output (open at every object node). Set by routerSchemas.
	input, output, advertisedOutput []byte
}

// toolAnnotations are pointers so that a missing hint is an error: the
// table is explicit, never inferred.
type toolAnnotations struct {
	ReadOnlyHint    *bool `json:"readOnlyHint"`
	DestructiveHint *bool `json:"destructiveHint"`
	IdempotentHint  *bool `json:"idempotentHint"`
	OpenWorldHint   *bool `json:"openWorldHint"`
}

var (
	enumValues = map[string][]string{
		"permission_class": {"read_only", "agent_mutation", "admin"},
		"idempotency":      {"natural", "key", "none"},
		"concurrency":      {"none", "cas"},
		"pagination":       {"none", "keyset", "stream"},
		"exposure":         {"default", "router_only", "hidden"},
	}
)

func oneOf(field, v string) error {
	for _, ok := range enumValues[field] {
		if v == ok {
			return nil
		}
	}
	return fmt.Errorf("%s %q is not one of %v", field, v, enumValues[field])
}

// loadRegistry reads and checks the structural integrity of the registry
// (the naming and style rules are `contract lint`'s job).
func loadRegistry(path string, ops []*operation, sp *spec) (*registry, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var reg registry
	if err := dec.Decode(&reg); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("%s: trailing data", path)
	}
	if reg.Server.Name == "" || reg.Server.Instructions == "" {
		return nil, fmt.Errorf("%s: server.name and server.instructions are required", path)
	}
	toolNameRE, err := reg.toolNamePattern()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	byOp := map[string]*operation{}
	for _, op := range ops {
		byOp[op.ID] = op
	}
	names := map[string]string{}
	toolOfOp := map[string]string{}
	for i, t := range reg.Tools {
		where := fmt.Sprintf("%s: tools[%d] (%s)", path, i, t.Name)
		if !toolNameRE.MatchString(t.Name) {
			return nil, fmt.Errorf("%s: name must be lowercase snake_case <domain>_<verb>", where)
		}
		for _, n := range append([]string{t.Name}, t.Aliases...) {
			if !toolNameRE.MatchString(n) {
				return nil, fmt.Errorf("%s: alias %q is not snake_case", where, n)
			}
			if prev, dup := names[n]; dup {
				return nil, fmt.Errorf("%s: name %q already used by %s", where, n, prev)
			}
			names[n] = t.Name
		}
		if t.OperationID == "" {
			if err := t.routerSchemas(&inlineRefs{defs: reg.Defs, spec: sp}); err != nil {
				return nil, fmt.Errorf("%s: %w", where, err)
			}
		} else {
			if len(t.InputSchema) > 0 || len(t.OutputSchema) > 0 {
				return nil, fmt.Errorf("%s: only router tools (operation_id null) state input_schema/output_schema inline", where)
			}
			if _, ok := byOp[t.OperationID]; !ok {
				return nil, fmt.Errorf("%s: operation_id %q is not in openapi.json", where, t.OperationID)
			}
			if prev, dup := toolOfOp[t.OperationID]; dup {
				return nil, fmt.Errorf("%s: operation %q already has tool %s", where, t.OperationID, prev)
			}
			toolOfOp[t.OperationID] = t.Name
		}
		if t.Title == "" || t.Description == "" || t.CLI == "" {
			return nil, fmt.Errorf("%s: title, description and cli are required", where)
		}
		a := t.Annotations
		if a.ReadOnlyHint == nil || a.DestructiveHint == nil || a.IdempotentHint == nil || a.OpenWorldHint == nil {
			return nil, fmt.Errorf("%s: annotations must state readOnlyHint, destructiveHint, idempotentHint and openWorldHint", where)
		}
		for _, fv := range [][2]string{
			{"permission_class", t.PermissionClass}, {"idempotency", t.Idempotency},
			{"concurrency", t.Concurrency}, {"pagination", t.Pagination}, {"exposure", t.Exposure},
		} {
			if err := oneOf(fv[0], fv[1]); err != nil {
				return nil, fmt.Errorf("%s: %w", where, err)
			}
		}
		if t.ResultBudget <= 0 {
			return nil, fmt.Errorf("%s: result_budget_bytes must be positive", where)
		}
		if len(t.Scenarios) != 5 {
			return nil, fmt.Errorf("%s: exactly five scenarios are required, got %d", where, len(t.Scenarios))
		}
		for _, sc := range t.Scenarios {
			if sc == "" {
				return nil, fmt.Errorf("%s: empty scenario", where)
			}
		}
		if t.HiddenContext == nil {
			t.HiddenContext = []string{}
		}
		if t.Aliases == nil {
			t.Aliases = []string{}
		}
	}
	return &reg, nil
}

// toolNamePattern is the tool-name grammar, written once in the registry as
// $defs.ToolName.pattern (router tools' name inputs refer to it).
func (reg *registry) toolNamePattern() (*regexp.Regexp, error) {
	var def struct {
		Pattern string `json:"pattern"`
	}
	if raw, ok := reg.Defs["ToolName"]; !ok || json.Unmarshal(raw, &def) != nil || def.Pattern == "" {
		return nil, errors.New("$defs.ToolName must state the tool-name pattern")
	}
	return regexp.Compile(def.Pattern)
}

// routerSchemas checks a tool without an operation (a router tool: tool_search,
// tool_describe, tool_execute) and prepares its inline schemas for emission. Such a
// tool is router_only; its input is a closed object (every object node with properties
// closed) with a required box_key; its output is an object schema. Both must compile.
func (t *toolEntry) routerSchemas(refs *inlineRefs) error {
	if t.Exposure != "router_only" {
		return errors.New("a tool without operation_id is a router tool: exposure must be router_only")
	}
	in, err := inlineSchema("input_schema", t.InputSchema)
	if err != nil {
		return err
	}
	if in, err = refs.expand(in, modeInput, "input_schema"); err != nil {
		return err
	}
	if in["additionalProperties"] != false {
		return errors.New("input_schema must be closed (additionalProperties false)")
	}
	props, _ := in["properties"].(map[string]any)
	required, _ := in["required"].([]any)
	if _, ok := props["box_key"]; !ok || !containsValue(required, "box_key") {
		return errors.New("input_schema must require box_key")
	}
	if path, open := openInputNode(in, "input_schema"); open {
		return fmt.Errorf("%s: an input object with properties must be closed (additionalProperties false)", path)
	}
	out, err := inlineSchema("output_schema", t.OutputSchema)
	if err != nil {
		return err
	}
	if out, err = refs.expand(out, modeOutput, "output_schema"); err != nil {
		return err
	}
	if t.input, err = compiledDoc(t.Name+".input", in); err != nil {
		return err
	}
	if t.output, err = compiledDoc(t.Name+".output", out); err != nil {
		return err
	}
	t.advertisedOutput, err = compiledDoc(t.Name+".advertised_output", lean(openObjects(out)).(map[string]any))
	return err
}

// inlineRefs expands the $refs a router tool's inline schema may use, so that what every
// operation shares is written once: "#/$defs/NAME" (the registry's $defs) and
// "openapi.json#/components/schemas/NAME" or "openapi.json#/components/parameters/NAME"
// (a parameter's schema with its description), converted like an operation's schemas.
type inlineRefs struct {
	defs map[string]json.RawMessage
	spec *spec
}

func (r *inlineRefs) expand(doc map[string]any, m mode, at string) (map[string]any, error) {
	out, err := r.node(doc, m, at, 0)
	if err != nil {
		return nil, err
	}
	return out.(map[string]any), nil
}

func (r *inlineRefs) node(v any, m mode, at string, depth int) (any, error) {
	if depth > 32 {
		return nil, fmt.Errorf("%s: $ref chain too deep", at)
	}
	switch n := v.(type) {
	case []any:
		out := make([]any, len(n))
		for i, x := range n {
			var err error
			if out[i], err = r.node(x, m, fmt.Sprintf("%s/%d", at, i), depth); err != nil {
				return nil, err
			}
		}
		return out, nil
	case map[string]any:
		out := map[string]any{}
		if ref, ok := n["$ref"].(string); ok {
			target, err := r.target(ref, m, at)
			if err != nil {
				return nil, err
			}
			exp, err := r.node(target, m, at, depth+1)
			if err != nil {
				return nil, err
			}
			for k, x := range exp.(map[string]any) {
				out[k] = x
			}
		}
		for k, x := range n {
			if k == "$ref" {
				continue
			}
			var err error
			if out[k], err = r.node(x, m, at+"/"+k, depth); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	return v, nil
}

func (r *inlineRefs) target(ref string, m mode, at string) (map[string]any, error) {
	const defs, schemas, params = "#/$defs/", "openapi.json#/components/schemas/", "openapi.json#/components/parameters/"
	switch {
	case strings.HasPrefix(ref, defs):
		raw, ok := r.defs[strings.TrimPrefix(ref, defs)]
		var doc map[string]any
		if !ok || json.Unmarshal(raw, &doc) != nil || doc == nil {
			return nil, fmt.Errorf("%s: $ref %s: no such schema in $defs", at, ref)
		}
		return doc, nil
	case r.spec != nil && strings.HasPrefix(ref, schemas):
		return r.spec.newConv(m).convert(map[string]any{"$ref": "#/components/schemas/" + strings.TrimPrefix(ref, schemas)}, at)
	case r.spec != nil && strings.HasPrefix(ref, params):
		ps, _ := r.spec.doc["components"].(map[string]any)["parameters"].(map[string]any)
		p, ok := ps[strings.TrimPrefix(ref, params)].(map[string]any)
		if !ok || p["schema"] == nil {
			return nil, fmt.Errorf("%s: $ref %s: no such parameter with a schema", at, ref)
		}
		sch, err := r.spec.newConv(m).convert(p["schema"], at)
		if err != nil {
			return nil, err
		}
		if d, ok := p["description"]; ok {
			sch["description"] = d
		}
		return sch, nil
	}
	return nil, fmt.Errorf("%s: $ref %s: a router schema may refer only to #/$defs/… or openapi.json#/components/{schemas,parameters}/…", at, ref)
}

// inlineSchema decodes an inline schema: a JSON object of type object. It gets the
// 2020-12 $schema of the generated documents when it states none.
func inlineSchema(field string, raw json.RawMessage) (map[string]any, error) {
	var doc map[string]any
	if len(raw) == 0 || json.Unmarshal(raw, &doc) != nil || doc == nil {
		return nil, fmt.Errorf("%s must be a JSON Schema object", field)
	}
	if doc["type"] != "object" {
		return nil, fmt.Errorf("%s must be of type object", field)
	}
	if _, ok := doc["$schema"]; !ok {
		doc["$schema"] = draft2020
	}
	return doc, nil
}

// compiledDoc is the compact document (keys sorted, so deterministic) once it compiles.
func compiledDoc(name string, doc map[string]any) ([]byte, error) {
	b, err := json.Marshal(doc)
	if err != nil {
		return nil, err
	}
	if _, err := schema.Compile(name, b); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return b, nil
}

// Keywords whose value is not a subschema: plain values, and maps of name → subschema.
var (
	schemaValueKeys = map[string]bool{"enum": true, "const": true, "default": true, "examples": true, "required": true}
	schemaMapKeys   = map[string]bool{"properties": true, "$defs": true, "patternProperties": true, "dependentSchemas": true}
)

// eachSubschema calls fn for every direct subschema of a schema object.
func eachSubschema(n map[string]any, fn func(key string, sub any)) {
	for k, v := range n {
		switch {
		case schemaValueKeys[k]:
		case schemaMapKeys[k]:
			m, _ := v.(map[string]any)
			for name, sub := range m {
				fn(k+"/"+name, sub)
			}
		default:
			if list, ok := v.([]any); ok { // allOf, anyOf, oneOf, prefixItems
				for i, sub := range list {
					fn(fmt.Sprintf("%s/%d", k, i), sub)
				}
			} else {
				fn(k, v)
			}
		}
	}
}

// openInputNode finds an object node with properties that is not closed.
func openInputNode(node any, path string) (found string, open bool) {
	n, ok := node.(map[string]any)
	if !ok {
		return "", false
	}
	if _, props := n["properties"]; props && n["additionalProperties"] != false {
		return path, true
	}
	eachSubschema(n, func(key string, sub any) {
		if !open {
			found, open = openInputNode(sub, path+"/"+key)
		}
	})
	return found, open
}

// openObjects returns a copy of a schema with additionalProperties true at every object
// node that does not give it a schema (the advertised output, SPEC §1).
func openObjects(node any) any {
	n, ok := node.(map[string]any)
	if !ok {
		return node
	}
	out := make(map[string]any, len(n)+1)
	for k, v := range n {
		out[k] = v
	}
	for k := range schemaMapKeys {
		if m, ok := n[k].(map[string]any); ok {
			c := make(map[string]any, len(m))
			for name, sub := range m {
				c[name] = openObjects(sub)
			}
			out[k] = c
		}
	}
	for _, k := range []string{"items", "additionalProperties", "not", "if", "then", "else", "contains"} {
		if sub, ok := n[k].(map[string]any); ok {
			out[k] = openObjects(sub)
		}
	}
	for _, k := range []string{"allOf", "anyOf", "oneOf", "prefixItems"} {
		if list, ok := n[k].([]any); ok {
			c := make([]any, len(list))
			for i, sub := range list {
				c[i] = openObjects(sub)
			}
			out[k] = c
		}
	}
	_, props := n["properties"]
	if _, sub := n["additionalProperties"].(map[string]any); (n["type"] == "object" || props) && !sub {
		out["additionalProperties"] = true
	}
	return out
}

func containsValue(list []any, v any) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}
