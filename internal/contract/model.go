package contract

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strings"
)

// Contract is one loaded version of the contract. Either half may be absent (a diff
// of a single file); lint needs both.
type Contract struct {
	Label       string // how a report names this version ("" = the file names)
	OpenAPIName string
	ToolsName   string
	Doc         map[string]any // the OpenAPI document (numbers as json.Number); nil when absent
	OpenAPIRaw  []byte
	Reg         map[string]any // the tool registry; nil when absent

	Ops    []*Operation // in document order (paths sorted, then method order)
	OpByID map[string]*Operation
	Tools  []*Tool

	// Problems are structural defects found while loading (a $ref that does not
	// resolve, a tool entry that is not an object...). Lint reports them; diff
	// refuses a contract that has any.
	Problems []Finding
}

// Operation is one OpenAPI operation.
type Operation struct {
	ID     string
	Method string // upper case
	Path   string
	Ptr    string // JSON pointer of the operation object
	Node   map[string]any

	Params []Param
	// Input is the tool-shaped input: path and query parameters and the JSON body's
	// fields flattened into one object (headers are transport, not input). Output is
	// the JSON schema of the success response. Either is nil when it cannot be built.
	Input  *Node
	Output *Node
	// BodySchemaPtr points at the request body's JSON schema ("" without a body).
	BodySchemaPtr string
}

// Param is one operation parameter.
type Param struct {
	Name     string
	In       string
	Required bool
	Ptr      string // pointer of the parameter object (after $ref)
	At       string // pointer where the operation lists it
	Obj      map[string]any
}

// Tool is one registry entry.
type Tool struct {
	Index int
	Ptr   string // "/tools/N"
	Raw   map[string]any

	Name            string
	Title           string
	Description     string
	OperationID     string // "" when null or absent
	Annotations     map[string]*bool
	PermissionClass string
	Idempotency     string
	Concurrency     string
	Pagination      string
	Exposure        string
	HiddenContext   []string
	Aliases         []string
	Deprecated      bool
	Scenarios       []string
	CLI             string

	Op     *Operation // nil for router tools and unknown operation IDs
	Input  *Node      // the operation's flattened input, or the inline input_schema
	Output *Node
}

// AnnotationNames are the four MCP hints every tool states explicitly.
var AnnotationNames = []string{"readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"}

// Hint returns an annotation value (false when absent).
func (t *Tool) Hint(name string) bool {
	if p := t.Annotations[name]; p != nil {
		return *p
	}
	return false
}

// Load parses a Source. A JSON syntax error is an error; everything else that is
// wrong is a finding.
func Load(src *Source) (*Contract, error) {
	c := &Contract{OpenAPIName: src.OpenAPIName, ToolsName: src.ToolsName, OpByID: map[string]*Operation{}}
	if src.OpenAPI != nil {
		doc, err := decodeObject(src.OpenAPI)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", src.OpenAPIName, err)
		}
		c.Doc, c.OpenAPIRaw = doc, src.OpenAPI
		c.loadOperations()
	}
	if src.Tools != nil {
		reg, err := decodeObject(src.Tools)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", src.ToolsName, err)
		}
		c.Reg = reg
		c.loadTools()
	}
	return c, nil
}

func decodeObject(data []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("not a JSON object: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("trailing data after the JSON object")
	}
	return m, nil
}

func (c *Contract) problem(file, ptr, msg string) {
	c.Problems = append(c.Problems, Finding{Rule: ruleStructure.ID, Name: ruleStructure.Name, File: file, Pointer: ptr, Message: msg})
}

var methodOrder = []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}

func (c *Contract) loadOperations() {
	r := &resolver{file: c.OpenAPIName, root: c.Doc}
	paths, _ := c.Doc["paths"].(map[string]any)
	for _, p := range sortedKeys(paths) {
		itemPtr := ptrJoin("/paths", p)
		item, ok := paths[p].(map[string]any)
		if !ok {
			c.problem(c.OpenAPIName, itemPtr, "path item is not an object")
			continue
		}
		for _, method := range methodOrder {
			raw, ok := item[method]
			if !ok {
				continue
			}
			opPtr := ptrJoin(itemPtr, method)
			node, ok := raw.(map[string]any)
			if !ok {
				c.problem(c.OpenAPIName, opPtr, "operation is not an object")
				continue
			}
			op := &Operation{Method: strings.ToUpper(method), Path: p, Ptr: opPtr, Node: node}
			op.ID, _ = node["operationId"].(string)
			c.buildOperation(r, op, item, itemPtr)
			c.Ops = append(c.Ops, op)
			if op.ID != "" {
				if _, dup := c.OpByID[op.ID]; !dup {
					c.OpByID[op.ID] = op
				}
			}
		}
	}
}

// derefObject follows $refs on a non-schema object (parameter, request body, response).
func (r *resolver) derefObject(v any, ptr string) (map[string]any, string, error) {
	for i := 0; i < 32; i++ {
		m, ok := v.(map[string]any)
		if !ok {
			return nil, ptr, fmt.Errorf("not an object")
		}
		ref, ok := m["$ref"].(string)
		if !ok {
			return m, ptr, nil
		}
		next, nptr, err := r.lookup(ref)
		if err != nil {
			return nil, ptr, err
		}
		v, ptr = next, nptr
	}
	return nil, ptr, fmt.Errorf("$ref chain too long")
}

// jsonMedia returns the application/json (or +json) media type object and its key.
func jsonMedia(content map[string]any) (map[string]any, string) {
	if m, ok := content["application/json"].(map[string]any); ok {
		return m, "application/json"
	}
	for _, k := range sortedKeys(content) {
		if strings.HasPrefix(k, "application/json") || strings.HasSuffix(k, "+json") {
			if m, ok := content[k].(map[string]any); ok {
				return m, k
			}
		}
	}
	return nil, ""
}

func (c *Contract) buildOperation(r *resolver, op *Operation, item map[string]any, itemPtr string) {
	input := &Node{File: c.OpenAPIName, At: op.Ptr, Ptr: op.Ptr, Type: "object", Props: map[string]*Node{}, Required: map[string]bool{}, Raw: map[string]any{}}
	seen := map[string]int{}
	for _, lvl := range []struct {
		list any
		ptr  string
	}{{item["parameters"], itemPtr + "/parameters"}, {op.Node["parameters"], op.Ptr + "/parameters"}} {
		arr, _ := lvl.list.([]any)
		for i, raw := range arr {
			at := ptrJoin(lvl.ptr, i)
			pm, pptr, err := r.derefObject(raw, at)
			if err != nil {
				c.problem(c.OpenAPIName, at, "parameter: "+err.Error())
				continue
			}
			p := Param{Ptr: pptr, At: at, Obj: pm}
			p.Name, _ = pm["name"].(string)
			p.In, _ = pm["in"].(string)
			p.Required, _ = pm["required"].(bool)
			if p.In == "path" {
				p.Required = true
			}
			key := p.In + "\x00" + p.Name
			if j, dup := seen[key]; dup {
				op.Params[j] = p // operation level overrides path-item level
			} else {
				seen[key] = len(op.Params)
				op.Params = append(op.Params, p)
			}
		}
	}
	for _, p := range op.Params {
		if p.In != "path" && p.In != "query" {
			continue
		}
		pm := p.Obj
		var n *Node
		var err error
		if sch, ok := pm["schema"]; ok {
			n, err = r.build(sch, p.Ptr+"/schema", nil)
		} else {
			n = &Node{File: c.OpenAPIName, Ptr: p.Ptr, Raw: map[string]any{}}
		}
		if err != nil {
			c.problem(c.OpenAPIName, p.Ptr, err.Error())
			continue
		}
		n.At = p.Ptr + "/name"
		if d, ok := pm["description"].(string); ok && n.Description() == "" {
			n.Raw = withKey(n.Raw, "description", d)
		}
		input.Props[p.Name] = n
		if p.Required {
			input.Required[p.Name] = true
		}
	}
	if rb, ok := op.Node["requestBody"]; ok {
		rbm, rbPtr, err := r.derefObject(rb, op.Ptr+"/requestBody")
		if err != nil {
			c.problem(c.OpenAPIName, op.Ptr+"/requestBody", err.Error())
		} else {
			required, _ := rbm["required"].(bool)
			content, _ := rbm["content"].(map[string]any)
			if media, mt := jsonMedia(content); media != nil {
				if sch, ok := media["schema"]; ok {
					op.BodySchemaPtr = ptrJoin(rbPtr, "content", mt, "schema")
					body, err := r.build(sch, op.BodySchemaPtr, nil)
					if err != nil {
						c.problem(c.OpenAPIName, op.BodySchemaPtr, err.Error())
					} else if body.Props != nil && (body.Type == "" || body.Type == "object") {
						input.Ptr = body.Ptr
						for name, pn := range body.Props {
							if _, dup := input.Props[name]; dup {
								c.problem(c.OpenAPIName, pn.At, fmt.Sprintf("input field %q is both a parameter and a body field", name))
								continue
							}
							input.Props[name] = pn
							if body.Required[name] && required {
								input.Required[name] = true
							}
						}
						input.Variants = body.Variants
						input.Raw = body.Raw
					} else {
						// A body that is not an object with fields is one input named "body".
						input.Props["body"] = body
						if required {
							input.Required["body"] = true
						}
					}
				}
			}
		}
	}
	op.Input = input

	responses, _ := op.Node["responses"].(map[string]any)
	codes := sortedKeys(responses)
	sort.SliceStable(codes, func(i, j int) bool { return codes[i] == "200" && codes[j] != "200" })
	for _, code := range codes {
		if len(code) != 3 || code[0] != '2' {
			continue
		}
		at := ptrJoin(op.Ptr, "responses", code)
		resp, rptr, err := r.derefObject(responses[code], at)
		if err != nil {
			c.problem(c.OpenAPIName, at, err.Error())
			break
		}
		content, _ := resp["content"].(map[string]any)
		if media, mt := jsonMedia(content); media != nil {
			if sch, ok := media["schema"]; ok {
				n, err := r.build(sch, ptrJoin(rptr, "content", mt, "schema"), nil)
				if err != nil {
					c.problem(c.OpenAPIName, at, err.Error())
				}
				op.Output = n
			}
		}
		break
	}
}

func withKey(m map[string]any, k string, v any) map[string]any {
	out := make(map[string]any, len(m)+1)
	for kk, vv := range m {
		out[kk] = vv
	}
	out[k] = v
	return out
}

// Registry keys a tool entry may have.
var toolKeys = map[string]bool{
	"name": true, "operation_id": true, "title": true, "description": true, "annotations": true,
	"permission_class": true, "idempotency": true, "concurrency": true, "hidden_context": true,
	"pagination": true, "result_budget_bytes": true, "cli": true, "exposure": true, "aliases": true,
	"deprecated": true, "scenarios": true, "input_schema": true, "output_schema": true,
}

func (c *Contract) loadTools() {
	arr, ok := c.Reg["tools"].([]any)
	if !ok {
		c.problem(c.ToolsName, "/tools", "tools must be an array")
		return
	}
	for i, raw := range arr {
		ptr := ptrJoin("/tools", i)
		m, ok := raw.(map[string]any)
		if !ok {
			c.problem(c.ToolsName, ptr, "tool entry is not an object")
			continue
		}
		t := &Tool{Index: i, Ptr: ptr, Raw: m}
		t.Name, _ = m["name"].(string)
		t.Title, _ = m["title"].(string)
		t.Description, _ = m["description"].(string)
		t.OperationID, _ = m["operation_id"].(string)
		t.PermissionClass, _ = m["permission_class"].(string)
		t.Idempotency, _ = m["idempotency"].(string)
		t.Concurrency, _ = m["concurrency"].(string)
		t.Pagination, _ = m["pagination"].(string)
		t.Exposure, _ = m["exposure"].(string)
		t.CLI, _ = m["cli"].(string)
		t.Deprecated, _ = m["deprecated"].(bool)
		t.HiddenContext = stringList(m["hidden_context"])
		t.Aliases = stringList(m["aliases"])
		t.Scenarios = stringList(m["scenarios"])
		if a, ok := m["annotations"].(map[string]any); ok {
			t.Annotations = map[string]*bool{}
			for _, k := range AnnotationNames {
				if b, ok := a[k].(bool); ok {
					t.Annotations[k] = &b
				}
			}
		}
		if op := c.OpByID[t.OperationID]; op != nil && t.OperationID != "" {
			t.Op = op
			t.Input, t.Output = op.Input, op.Output
		}
		// Router tools have no HTTP operation: their schemas are written inline, and may
		// refer to the registry's $defs and to the OpenAPI document's components (which
		// need the document: without it, as in eval, they are not built).
		r := &resolver{file: c.ToolsName, openapiRefs: true}
		if s, ok := m["input_schema"]; ok && t.Op == nil && c.Doc != nil {
			r.root, r.base = c.inlineRoot(s), ptr+"/input_schema"
			if n, err := r.build(s, r.base, nil); err != nil {
				c.problem(c.ToolsName, r.base, err.Error())
			} else {
				t.Input = n
			}
		}
		if s, ok := m["output_schema"]; ok && t.Op == nil && c.Doc != nil {
			r.root, r.base = c.inlineRoot(s), ptr+"/output_schema"
			if n, err := r.build(s, r.base, nil); err != nil {
				c.problem(c.ToolsName, r.base, err.Error())
			} else {
				t.Output = n
			}
		}
		c.Tools = append(c.Tools, t)
	}
}

// inlineRoot is the resolution root of a router tool's inline schema: the schema itself,
// the registry's $defs and the OpenAPI document's components.
func (c *Contract) inlineRoot(s any) any {
	root := map[string]any{}
	if m, ok := s.(map[string]any); ok {
		for k, v := range m {
			root[k] = v
		}
	}
	if defs, ok := c.Reg["$defs"]; ok {
		root["$defs"] = defs
	}
	if comps, ok := c.Doc["components"]; ok {
		root["components"] = comps
	}
	return root
}

func stringList(v any) []string {
	arr, ok := v.([]any)
	if !ok {
		return nil
	}
	out := make([]string, 0, len(arr))
	for _, x := range arr {
		if s, ok := x.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

// ToolNamePattern is the registry's tool-name grammar, $defs.ToolName.pattern (nil when
// the registry states none or it does not compile).
func (c *Contract) ToolNamePattern() *regexp.Regexp {
	defs, _ := c.Reg["$defs"].(map[string]any)
	def, _ := defs["ToolName"].(map[string]any)
	p, _ := def["pattern"].(string)
	if p == "" {
		return nil
	}
	re, err := regexp.Compile(p)
	if err != nil {
		return nil
	}
	return re
}

// ToolByName returns the canonical tool with that name.
func (c *Contract) ToolByName(name string) *Tool {
	for _, t := range c.Tools {
		if t.Name == name {
			return t
		}
	}
	return nil
}
