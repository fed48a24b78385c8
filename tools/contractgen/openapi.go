package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
)

// spec is the raw OpenAPI document (numbers kept as json.Number) plus the
// component graph used for $ref resolution.
type spec struct {
	doc       map[string]any
	schemas   map[string]any // components.schemas
	recursive map[string]bool
}

func loadSpec(path string) (*spec, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	// kin-openapi validates the document as OpenAPI 3.0 (refs resolve, shapes
	// are legal); the generator itself works on the raw JSON.
	loader := openapi3.NewLoader()
	kdoc, err := loader.LoadFromData(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if err := kdoc.Validate(context.Background()); err != nil {
		return nil, fmt.Errorf("%s: invalid OpenAPI document: %w", path, err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var doc map[string]any
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	s := &spec{doc: doc, schemas: map[string]any{}}
	if comps, ok := doc["components"].(map[string]any); ok {
		if sc, ok := comps["schemas"].(map[string]any); ok {
			s.schemas = sc
		}
	}
	if err := s.findRecursive(); err != nil {
		return nil, err
	}
	return s, nil
}

// ref resolves a local reference "#/a/b/c" against the document.
func (s *spec) ref(ref string) (any, error) {
	if !strings.HasPrefix(ref, "#/") {
		return nil, fmt.Errorf("unsupported non-local $ref %q", ref)
	}
	var cur any = s.doc
	for _, tok := range strings.Split(ref[2:], "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("unresolvable $ref %q", ref)
		}
		if cur, ok = m[tok]; !ok {
			return nil, fmt.Errorf("unresolvable $ref %q", ref)
		}
	}
	return cur, nil
}

// deref follows $ref chains on a non-schema object (parameter, requestBody,
// response).
func (s *spec) deref(node any) (map[string]any, error) {
	for i := 0; i < 32; i++ {
		m, ok := node.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("expected an object")
		}
		r, ok := m["$ref"].(string)
		if !ok {
			return m, nil
		}
		next, err := s.ref(r)
		if err != nil {
			return nil, err
		}
		node = next
	}
	return nil, fmt.Errorf("$ref chain too long")
}

const schemaRefPrefix = "#/components/schemas/"

func schemaRefName(ref string) (string, error) {
	if !strings.HasPrefix(ref, schemaRefPrefix) {
		return "", fmt.Errorf("schema $ref %q does not point into components/schemas", ref)
	}
	name := ref[len(schemaRefPrefix):]
	if strings.Contains(name, "/") {
		return "", fmt.Errorf("schema $ref %q points inside a component", ref)
	}
	return strings.ReplaceAll(strings.ReplaceAll(name, "~1", "/"), "~0", "~"), nil
}

// findRecursive marks the components that can reach themselves through
// $refs; only those are emitted as $defs, every other component is inlined.
func (s *spec) findRecursive() error {
	edges := map[string][]string{}
	for name, sch := range s.schemas {
		seen := map[string]bool{}
		var walk func(v any) error
		walk = func(v any) error {
			switch t := v.(type) {
			case map[string]any:
				if r, ok := t["$ref"].(string); ok {
					n, err := schemaRefName(r)
					if err != nil {
						return fmt.Errorf("components.schemas.%s: %w", name, err)
					}
					if _, ok := s.schemas[n]; !ok {
						return fmt.Errorf("components.schemas.%s: unknown schema %q", name, n)
					}
					if !seen[n] {
						seen[n] = true
						edges[name] = append(edges[name], n)
					}
				}
				for k, c := range t {
					if k == "example" || k == "default" || k == "enum" {
						continue
					}
					if err := walk(c); err != nil {
						return err
					}
				}
			case []any:
				for _, c := range t {
					if err := walk(c); err != nil {
						return err
					}
				}
			}
			return nil
		}
		if err := walk(sch); err != nil {
			return err
		}
	}
	s.recursive = map[string]bool{}
	for name := range s.schemas {
		// DFS from name's successors looking for name.
		visited := map[string]bool{}
		stack := append([]string(nil), edges[name]...)
		for len(stack) > 0 {
			n := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if n == name {
				s.recursive[name] = true
				break
			}
			if visited[n] {
				continue
			}
			visited[n] = true
			stack = append(stack, edges[n]...)
		}
	}
	return nil
}

// param is one operation parameter.
type param struct {
	Name     string
	In       string // path, query, header, cookie
	Required bool
	Node     map[string]any // the parameter object (resolved)
}

// operation is everything the generator knows about one OpenAPI operation.
type operation struct {
	ID, Method, Path string
	Admin            bool
	PathParams       []param
	QueryParams      []param
	HeaderParams     []param

	HasBody      bool
	BodyJSON     bool     // the body has an application/json schema
	MediaTypes   []string // the requestBody's declared media types, sorted
	BodyRequired bool     // requestBody.required
	BodyArg      string   // non-empty: the whole body is this one input property
	BodyRest     bool     // the body is an open object: every non-parameter argument goes into it
	BodyFields   []string

	Input            map[string]any
	Body             map[string]any // nil when no JSON body
	Output           map[string]any // nil when no JSON success response
	AdvertisedOutput map[string]any
	SuccessStatus    string

	// Bound to gen/api by goAPI.bind.
	Go goBinding
}

var methodOrder = []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}

func (s *spec) operations() ([]*operation, error) {
	paths, _ := s.doc["paths"].(map[string]any)
	var ops []*operation
	seen := map[string]bool{}
	for _, path := range sortedKeys(paths) {
		item, err := s.deref(paths[path])
		if err != nil {
			return nil, fmt.Errorf("paths.%s: %w", path, err)
		}
		for _, method := range methodOrder {
			raw, ok := item[method]
			if !ok {
				continue
			}
			node, ok := raw.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("paths.%s.%s: not an object", path, method)
			}
			op, err := s.operation(path, method, item, node)
			if err != nil {
				return nil, fmt.Errorf("%s %s: %w", strings.ToUpper(method), path, err)
			}
			if seen[op.ID] {
				return nil, fmt.Errorf("duplicate operationId %q", op.ID)
			}
			seen[op.ID] = true
			ops = append(ops, op)
		}
	}
	sort.Slice(ops, func(i, j int) bool { return ops[i].ID < ops[j].ID })
	return ops, nil
}

func (s *spec) operation(path, method string, item, node map[string]any) (*operation, error) {
	id, _ := node["operationId"].(string)
	if id == "" {
		return nil, fmt.Errorf("missing operationId")
	}
	op := &operation{ID: id, Method: strings.ToUpper(method), Path: path}

	// Security: operation-level overrides the document default.
	sec, ok := node["security"].([]any)
	if !ok {
		sec, _ = s.doc["security"].([]any)
	}
	for _, req := range sec {
		if m, ok := req.(map[string]any); ok {
			if _, ok := m["adminToken"]; ok {
				op.Admin = true
			}
		}
	}

	// Parameters: path-item level, overridden by operation level (name+in).
	type key struct{ name, in string }
	var order []key
	params := map[key]param{}
	for _, list := range []any{item["parameters"], node["parameters"]} {
		arr, _ := list.([]any)
		for _, raw := range arr {
			p, err := s.deref(raw)
			if err != nil {
				return nil, fmt.Errorf("parameter: %w", err)
			}
			name, _ := p["name"].(string)
			in, _ := p["in"].(string)
			req, _ := p["required"].(bool)
			k := key{name, in}
			if _, dup := params[k]; !dup {
				order = append(order, k)
			}
			params[k] = param{Name: name, In: in, Required: req || in == "path", Node: p}
		}
	}
	for _, k := range order {
		p := params[k]
		switch p.In {
		case "path":
			op.PathParams = append(op.PathParams, p)
		case "query":
			op.QueryParams = append(op.QueryParams, p)
		case "header":
			op.HeaderParams = append(op.HeaderParams, p)
		}
	}

	if err := s.buildSchemas(op, node); err != nil {
		return nil, err
	}
	return op, nil
}

// jsonSchemaOf returns the application/json (or +json) schema of a content map.
func jsonSchemaOf(content map[string]any) (any, bool) {
	if c, ok := content["application/json"].(map[string]any); ok {
		if sch, ok := c["schema"]; ok {
			return sch, true
		}
	}
	for _, mt := range sortedKeys(content) {
		if strings.HasPrefix(mt, "application/json") || strings.HasSuffix(mt, "+json") {
			if c, ok := content[mt].(map[string]any); ok {
				if sch, ok := c["schema"]; ok {
					return sch, true
				}
			}
		}
	}
	return nil, false
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
