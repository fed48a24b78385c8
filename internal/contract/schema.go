package contract

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// Node is a schema with its $refs resolved: the view lint and diff need (types,
// properties, requiredness, enums, defaults, bounds) plus the JSON pointer where each
// node is written, so that a finding can name the exact place to edit.
type Node struct {
	File string // the file the node is written in
	At   string // JSON pointer where the node is used (a property, items, a parameter)
	Ptr  string // JSON pointer of the node's definition in File (after following $refs)

	Type     string // "" when the schema does not say
	Nullable bool
	Props    map[string]*Node
	Required map[string]bool
	Items    *Node
	// Variants are the branches of a oneOf/anyOf; their properties are also merged
	// into Props (a field any branch accepts), Required keeps only fields every
	// branch requires.
	Variants []*Node
	// Recursive names a component that refers back to itself; it is not expanded.
	Recursive string

	Raw map[string]any // the schema object as written (after $ref resolution)
}

// Enum returns the enum values as canonical JSON strings (nil when there is no enum).
func (n *Node) Enum() []string {
	arr, ok := n.Raw["enum"].([]any)
	if !ok {
		return nil
	}
	out := make([]string, 0, len(arr))
	for _, v := range arr {
		out = append(out, canon(v))
	}
	return out
}

// Default returns the default as canonical JSON and whether there is one.
func (n *Node) Default() (string, bool) {
	v, ok := n.Raw["default"]
	if !ok {
		return "", false
	}
	return canon(v), true
}

// Number returns a numeric keyword (minimum, maxLength, ...) when present.
func (n *Node) Number(key string) (float64, bool) {
	switch v := n.Raw[key].(type) {
	case json.Number:
		f, err := v.Float64()
		return f, err == nil
	case float64:
		return v, true
	}
	return 0, false
}

// Description is the node's description ("" when absent).
func (n *Node) Description() string {
	s, _ := n.Raw["description"].(string)
	return s
}

// PropNames returns the property names in sorted order.
func (n *Node) PropNames() []string { return sortedKeys(n.Props) }

func canon(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// resolver resolves local $refs ("#/...") against one JSON document.
type resolver struct {
	file string
	root any
	base string // pointer of root inside file ("" for a whole document)
	// openapiRefs: root also holds the OpenAPI document's components (a router tool's
	// inline schema), so "openapi.json#/components/..." resolves like "#/components/...";
	// a parameter resolves to its schema with its description.
	openapiRefs bool
}

func (r *resolver) lookup(ref string) (any, string, error) {
	if r.openapiRefs {
		ref = strings.TrimPrefix(ref, OpenAPIFile)
	}
	if !strings.HasPrefix(ref, "#") {
		return nil, "", fmt.Errorf("unsupported non-local $ref %q", ref)
	}
	frag := strings.TrimPrefix(ref, "#")
	cur := r.root
	if frag != "" {
		for _, tok := range strings.Split(strings.TrimPrefix(frag, "/"), "/") {
			tok = unescapePtr(tok)
			switch c := cur.(type) {
			case map[string]any:
				v, ok := c[tok]
				if !ok {
					return nil, "", fmt.Errorf("unresolvable $ref %q", ref)
				}
				cur = v
			default:
				return nil, "", fmt.Errorf("unresolvable $ref %q", ref)
			}
		}
	}
	if p, ok := cur.(map[string]any); ok && r.openapiRefs && strings.HasPrefix(frag, "/components/parameters/") {
		sch := p["schema"]
		if m, ok := sch.(map[string]any); ok {
			if sub, ok := m["$ref"].(string); ok {
				var err error
				if sch, _, err = r.lookup(sub); err != nil {
					return nil, "", err
				}
			}
		}
		m, ok := sch.(map[string]any)
		if !ok {
			return nil, "", fmt.Errorf("$ref %q: a parameter without a schema", ref)
		}
		out := map[string]any{}
		for k, v := range m {
			out[k] = v
		}
		if d, ok := p["description"]; ok {
			out["description"] = d
		}
		cur = out
	}
	return cur, r.base + frag, nil
}

// build turns a schema object into a Node. stack holds the refs being expanded, so a
// self-referencing component stops instead of looping.
func (r *resolver) build(node any, ptr string, stack []string) (*Node, error) {
	n, err := r.follow(node, ptr, stack)
	if err == nil {
		n.At = ptr
	}
	return n, err
}

func (r *resolver) follow(node any, ptr string, stack []string) (*Node, error) {
	for hops := 0; ; hops++ {
		m, ok := node.(map[string]any)
		if !ok {
			if _, isBool := node.(bool); isBool {
				// A JSON Schema boolean schema constrains nothing lint or diff look at.
				return &Node{File: r.file, Ptr: ptr, Raw: map[string]any{}}, nil
			}
			return nil, fmt.Errorf("%s#%s: schema is not an object", r.file, ptr)
		}
		ref, isRef := m["$ref"].(string)
		if !isRef {
			return r.object(m, ptr, stack)
		}
		if hops > 32 {
			return nil, fmt.Errorf("%s#%s: $ref chain too long", r.file, ptr)
		}
		for _, s := range stack {
			if s == ref {
				return &Node{File: r.file, Ptr: ptr, Recursive: ref, Raw: map[string]any{}}, nil
			}
		}
		target, tptr, err := r.lookup(ref)
		if err != nil {
			return nil, fmt.Errorf("%s#%s: %w", r.file, ptr, err)
		}
		stack = append(stack, ref)
		node, ptr = target, tptr
	}
}

func (r *resolver) object(m map[string]any, ptr string, stack []string) (*Node, error) {
	n := &Node{File: r.file, Ptr: ptr, Raw: m, Required: map[string]bool{}}
	switch t := m["type"].(type) {
	case string:
		n.Type = t
	case []any: // JSON Schema 2020-12 (router tools): ["string", "null"]
		for _, x := range t {
			if s, _ := x.(string); s == "null" {
				n.Nullable = true
			} else if n.Type == "" {
				n.Type = s
			}
		}
	}
	if nb, _ := m["nullable"].(bool); nb {
		n.Nullable = true
	}
	if props, ok := m["properties"].(map[string]any); ok {
		n.Props = map[string]*Node{}
		for _, name := range sortedKeys(props) {
			c, err := r.build(props[name], ptr+"/properties/"+escapePtr(name), stack)
			if err != nil {
				return nil, err
			}
			n.Props[name] = c
		}
	}
	if req, ok := m["required"].([]any); ok {
		for _, x := range req {
			if s, ok := x.(string); ok {
				n.Required[s] = true
			}
		}
	}
	if it, ok := m["items"]; ok {
		c, err := r.build(it, ptr+"/items", stack)
		if err != nil {
			return nil, err
		}
		n.Items = c
	}
	// allOf: one object made of all branches (the way the project writes extensions).
	if all, ok := m["allOf"].([]any); ok {
		for i, b := range all {
			c, err := r.build(b, fmt.Sprintf("%s/allOf/%d", ptr, i), stack)
			if err != nil {
				return nil, err
			}
			n.absorb(c, true)
		}
	}
	for _, comb := range []string{"oneOf", "anyOf"} {
		arr, ok := m[comb].([]any)
		if !ok {
			continue
		}
		var common map[string]bool
		for i, b := range arr {
			c, err := r.build(b, fmt.Sprintf("%s/%s/%d", ptr, comb, i), stack)
			if err != nil {
				return nil, err
			}
			n.Variants = append(n.Variants, c)
			n.absorb(c, false)
			if common == nil {
				common = map[string]bool{}
				for k := range c.Required {
					common[k] = true
				}
			} else {
				for k := range common {
					if !c.Required[k] {
						delete(common, k)
					}
				}
			}
		}
		for k := range common {
			n.Required[k] = true
		}
	}
	return n, nil
}

// absorb merges the properties (and, for allOf, the requiredness and type) of c into n.
func (n *Node) absorb(c *Node, withRequired bool) {
	if c.Props != nil && n.Props == nil {
		n.Props = map[string]*Node{}
	}
	for k, v := range c.Props {
		if _, ok := n.Props[k]; !ok {
			n.Props[k] = v
		}
	}
	if withRequired {
		for k := range c.Required {
			n.Required[k] = true
		}
		if n.Items == nil {
			n.Items = c.Items
		}
	}
	if n.Type == "" && (withRequired || c.Type == "object") {
		n.Type = c.Type
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func escapePtr(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

func unescapePtr(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~1", "/"), "~0", "~")
}

// ptrJoin appends tokens to a JSON pointer, escaping each.
func ptrJoin(base string, toks ...any) string {
	var b strings.Builder
	b.WriteString(base)
	for _, t := range toks {
		b.WriteByte('/')
		b.WriteString(escapePtr(fmt.Sprint(t)))
	}
	return b.String()
}
