package main

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"
)

const draft2020 = "https://json-schema.org/draft/2020-12/schema"

// mode selects how object nodes are treated.
type mode int

const (
	// modeInput: closed (additionalProperties false) wherever the spec
	// declares properties and leaves additionalProperties unset; readOnly
	// properties are dropped.
	modeInput mode = iota
	// modeOutput: exactly as the spec says; writeOnly properties are dropped.
	modeOutput
	// modeAdvertised: like modeOutput, but additionalProperties is true at
	// every object node unless the spec gives it a schema.
	modeAdvertised
)

// conv converts OpenAPI 3.0 schema objects into JSON Schema 2020-12 for one
// output document. Components are inlined except recursive ones, which are
// referenced as #/$defs/Name and collected in used.
type conv struct {
	s    *spec
	mode mode
	used map[string]bool
}

func (s *spec) newConv(m mode) *conv { return &conv{s: s, mode: m, used: map[string]bool{}} }

// document finishes a root schema: $schema and the $defs closure.
func (c *conv) document(root map[string]any) (map[string]any, error) {
	out := map[string]any{"$schema": draft2020}
	for k, v := range root {
		out[k] = v
	}
	defs := map[string]any{}
	for {
		var pending []string
		for n := range c.used {
			if _, ok := defs[n]; !ok {
				pending = append(pending, n)
			}
		}
		if len(pending) == 0 {
			break
		}
		sort.Strings(pending)
		for _, n := range pending {
			d, err := c.convert(c.s.schemas[n], "#/components/schemas/"+n)
			if err != nil {
				return nil, err
			}
			defs[n] = d
		}
	}
	if len(defs) > 0 {
		out["$defs"] = defs
	}
	return out, nil
}

// resolve follows $refs at the top of a schema node. Recursive components are
// not followed (ok=false with their name).
func (c *conv) resolve(node any, at string) (m map[string]any, recName string, err error) {
	for i := 0; i < 64; i++ {
		mm, ok := node.(map[string]any)
		if !ok {
			return nil, "", fmt.Errorf("%s: schema is not an object", at)
		}
		r, ok := mm["$ref"].(string)
		if !ok {
			return mm, "", nil
		}
		name, err := schemaRefName(r)
		if err != nil {
			return nil, "", fmt.Errorf("%s: %w", at, err)
		}
		if c.s.recursive[name] {
			return nil, name, nil
		}
		node, ok = c.s.schemas[name]
		if !ok {
			return nil, "", fmt.Errorf("%s: unknown schema %q", at, name)
		}
		at = "#/components/schemas/" + name
	}
	return nil, "", fmt.Errorf("%s: $ref chain too long", at)
}

var passThrough = map[string]bool{
	"title": true, "description": true, "format": true, "pattern": true,
	"minLength": true, "maxLength": true, "minimum": true, "maximum": true,
	"multipleOf": true, "minItems": true, "maxItems": true, "uniqueItems": true,
	"minProperties": true, "maxProperties": true, "enum": true, "default": true,
	"deprecated": true, "const": true,
}

var dropped = map[string]bool{
	"example": true, "examples": true, "discriminator": true, "xml": true,
	"externalDocs": true, "readOnly": true, "writeOnly": true, "nullable": true,
	"exclusiveMinimum": true, "exclusiveMaximum": true, // handled explicitly
}

// hidden reports whether a property is dropped in this mode (readOnly in
// inputs, writeOnly in outputs).
func (c *conv) hidden(prop any, at string) (bool, error) {
	m, ok := prop.(map[string]any)
	if !ok {
		return false, nil
	}
	flag := "writeOnly"
	if c.mode == modeInput {
		flag = "readOnly"
	}
	if b, _ := m[flag].(bool); b {
		return true, nil
	}
	r, _, err := c.resolve(m, at)
	if err != nil || r == nil {
		return false, err
	}
	b, _ := r[flag].(bool)
	return b, nil
}

// convert converts one schema node.
func (c *conv) convert(node any, at string) (map[string]any, error) {
	m, rec, err := c.resolve(node, at)
	if err != nil {
		return nil, err
	}
	if rec != "" {
		c.used[rec] = true
		return map[string]any{"$ref": "#/$defs/" + rec}, nil
	}
	if _, ok := m["allOf"]; ok {
		merged, ok, err := c.mergeAllOf(m, at)
		if err != nil {
			return nil, err
		}
		if ok {
			m = merged
		}
	}

	out := map[string]any{}
	var hiddenProps map[string]bool
	for _, k := range sortedKeys(m) {
		v := m[k]
		switch {
		case k == "$ref":
			// unreachable: resolved above
		case strings.HasPrefix(k, "x-"), dropped[k]:
		case passThrough[k]:
			out[k] = v
		case k == "type":
			t, ok := v.(string)
			if !ok {
				return nil, fmt.Errorf("%s: type must be a string in OpenAPI 3.0", at)
			}
			out["type"] = t
		case k == "properties":
			props, ok := v.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("%s: properties must be an object", at)
			}
			cp := map[string]any{}
			for _, name := range sortedKeys(props) {
				pat := at + "/properties/" + name
				h, err := c.hidden(props[name], pat)
				if err != nil {
					return nil, err
				}
				if h {
					if hiddenProps == nil {
						hiddenProps = map[string]bool{}
					}
					hiddenProps[name] = true
					continue
				}
				ps, err := c.convert(props[name], pat)
				if err != nil {
					return nil, err
				}
				cp[name] = ps
			}
			out["properties"] = cp
		case k == "required":
			arr, ok := v.([]any)
			if !ok {
				return nil, fmt.Errorf("%s: required must be an array", at)
			}
			out["required"] = arr
		case k == "items", k == "not":
			cs, err := c.convert(v, at+"/"+k)
			if err != nil {
				return nil, err
			}
			out[k] = cs
		case k == "additionalProperties":
			switch t := v.(type) {
			case bool:
				out[k] = t
			default:
				cs, err := c.convert(v, at+"/additionalProperties")
				if err != nil {
					return nil, err
				}
				out[k] = cs
			}
		case k == "oneOf", k == "anyOf", k == "allOf":
			arr, ok := v.([]any)
			if !ok {
				return nil, fmt.Errorf("%s: %s must be an array", at, k)
			}
			var list []any
			for i, b := range arr {
				cs, err := c.convert(b, fmt.Sprintf("%s/%s/%d", at, k, i))
				if err != nil {
					return nil, err
				}
				list = append(list, cs)
			}
			out[k] = list
		default:
			return nil, fmt.Errorf("%s: unsupported schema keyword %q", at, k)
		}
	}

	// required without the properties this mode drops.
	if req, ok := out["required"].([]any); ok && hiddenProps != nil {
		var keep []any
		for _, r := range req {
			if s, _ := r.(string); !hiddenProps[s] {
				keep = append(keep, r)
			}
		}
		if len(keep) == 0 {
			delete(out, "required")
		} else {
			out["required"] = keep
		}
	}

	// OpenAPI 3.0 boolean exclusive bounds.
	for _, b := range [][2]string{{"exclusiveMinimum", "minimum"}, {"exclusiveMaximum", "maximum"}} {
		if ex, _ := m[b[0]].(bool); ex {
			if lim, ok := out[b[1]]; ok {
				out[b[0]] = lim
				delete(out, b[1])
			}
		}
	}

	// Object nodes.
	_, hasProps := out["properties"]
	_, hasAP := out["additionalProperties"]
	isObject := out["type"] == "object" || hasProps || (out["type"] == nil && hasAP)
	if isObject {
		switch c.mode {
		case modeInput:
			if !hasAP && hasProps {
				out["additionalProperties"] = false
			}
		case modeAdvertised:
			if ap, ok := out["additionalProperties"]; !ok || isBool(ap) {
				out["additionalProperties"] = true
			}
		}
	}

	// nullable → type union (and null in enum).
	if nb, _ := m["nullable"].(bool); nb {
		if t, ok := out["type"].(string); ok {
			out["type"] = []any{t, "null"}
			if enum, ok := out["enum"].([]any); ok {
				hasNull := false
				for _, e := range enum {
					if e == nil {
						hasNull = true
					}
				}
				if !hasNull {
					out["enum"] = append(append([]any(nil), enum...), nil)
				}
			}
		} else {
			wrapped := map[string]any{"anyOf": []any{out, map[string]any{"type": "null"}}}
			if d, ok := out["description"]; ok {
				wrapped["description"] = d
			}
			return wrapped, nil
		}
	}
	return out, nil
}

func isBool(v any) bool { _, ok := v.(bool); return ok }

// mergeableKeys may appear in an allOf branch that is merged into one object.
var mergeableKeys = map[string]bool{
	"type": true, "properties": true, "required": true, "additionalProperties": true,
	"description": true, "title": true, "minProperties": true, "maxProperties": true,
	"example": true, "allOf": true,
}

// mergeAllOf flattens an allOf of object schemas into one object schema (so
// that closing it is meaningful). ok=false leaves the allOf as it is.
func (c *conv) mergeAllOf(m map[string]any, at string) (map[string]any, bool, error) {
	branches, ok := m["allOf"].([]any)
	if !ok {
		return nil, false, fmt.Errorf("%s: allOf must be an array", at)
	}
	// allOf: [one schema] with only annotations beside it is how OpenAPI 3.0 gives a
	// $ref a default or description: it is that schema with those annotations.
	if len(branches) == 1 {
		annotated := true
		for k := range m {
			switch k {
			case "allOf", "default", "description", "title", "example", "deprecated":
			default:
				annotated = false
			}
		}
		if annotated {
			bm, rec, err := c.resolve(branches[0], at+"/allOf/0")
			if err != nil {
				return nil, false, err
			}
			if _, nested := bm["allOf"]; rec == "" && !nested {
				out := map[string]any{}
				for k, v := range bm {
					out[k] = v
				}
				for k, v := range m {
					if k != "allOf" {
						out[k] = v
					}
				}
				return out, true, nil
			}
		}
	}
	merged := map[string]any{}
	props := map[string]any{}
	var required []any
	reqSeen := map[string]bool{}
	var ap any
	addObj := func(b map[string]any) bool {
		for k := range b {
			if !mergeableKeys[k] && !strings.HasPrefix(k, "x-") {
				return false
			}
		}
		if t, ok := b["type"]; ok && t != "object" {
			return false
		}
		if p, ok := b["properties"].(map[string]any); ok {
			for name, ps := range p {
				if old, dup := props[name]; dup && !reflect.DeepEqual(old, ps) {
					return false
				}
				props[name] = ps
			}
		}
		if r, ok := b["required"].([]any); ok {
			for _, x := range r {
				if s, _ := x.(string); !reqSeen[s] {
					reqSeen[s] = true
					required = append(required, x)
				}
			}
		}
		if v, ok := b["additionalProperties"]; ok {
			switch {
			case ap == nil:
				ap = v
			case v == false || ap == false:
				ap = false
			case !reflect.DeepEqual(ap, v):
				return false
			}
		}
		for _, k := range []string{"description", "title", "minProperties", "maxProperties"} {
			if v, ok := b[k]; ok {
				if _, set := merged[k]; !set {
					merged[k] = v
				}
			}
		}
		return true
	}
	outer := map[string]any{}
	for k, v := range m {
		if k != "allOf" {
			outer[k] = v
		}
	}
	// Outer keys other than object keys (e.g. nullable) are kept as they are.
	rest := map[string]any{}
	for k, v := range outer {
		if !mergeableKeys[k] && !strings.HasPrefix(k, "x-") {
			rest[k] = v
			delete(outer, k)
		}
	}
	if !addObj(outer) {
		return nil, false, nil
	}
	for i, b := range branches {
		bm, rec, err := c.resolve(b, fmt.Sprintf("%s/allOf/%d", at, i))
		if err != nil {
			return nil, false, err
		}
		if rec != "" {
			return nil, false, nil
		}
		if _, nested := bm["allOf"]; nested {
			var ok bool
			bm, ok, err = c.mergeAllOf(bm, fmt.Sprintf("%s/allOf/%d", at, i))
			if err != nil || !ok {
				return nil, false, err
			}
		}
		if !addObj(bm) {
			return nil, false, nil
		}
	}
	merged["type"] = "object"
	if len(props) > 0 {
		merged["properties"] = props
	}
	if len(required) > 0 {
		merged["required"] = required
	}
	if ap != nil {
		merged["additionalProperties"] = ap
	}
	for k, v := range rest {
		merged[k] = v
	}
	return merged, true, nil
}

// objectShape reports whether a (resolved, allOf-merged) body schema can be
// flattened into the tool input: an object that declares properties.
func objectShape(m map[string]any) bool {
	for _, k := range []string{"oneOf", "anyOf", "allOf", "not", "nullable"} {
		if _, ok := m[k]; ok {
			return false
		}
	}
	if t, ok := m["type"]; ok && t != "object" {
		return false
	}
	_, hasProps := m["properties"].(map[string]any)
	return hasProps
}

// buildSchemas computes the operation's input, body and output documents.
func (s *spec) buildSchemas(op *operation, node map[string]any) error {
	in := s.newConv(modeInput)
	props := map[string]any{}
	var required []any
	addProp := func(name string, sch map[string]any, req bool) error {
		if _, dup := props[name]; dup {
			return fmt.Errorf("input field %q is defined twice (parameter and body field?)", name)
		}
		props[name] = sch
		if req {
			required = append(required, name)
		}
		return nil
	}
	paramSchema := func(p param) (map[string]any, error) {
		raw, ok := p.Node["schema"]
		if !ok {
			if content, ok := p.Node["content"].(map[string]any); ok {
				raw, ok = jsonSchemaOf(content)
				if !ok {
					return nil, fmt.Errorf("parameter %s: no JSON schema", p.Name)
				}
			} else {
				return nil, fmt.Errorf("parameter %s: no schema", p.Name)
			}
		}
		sch, err := in.convert(raw, "parameter "+p.Name)
		if err != nil {
			return nil, err
		}
		if d, ok := p.Node["description"]; ok {
			sch["description"] = d
		}
		if dep, _ := p.Node["deprecated"].(bool); dep {
			sch["deprecated"] = true
		}
		return sch, nil
	}
	var fixed []any // required non-body fields (always present)
	for _, p := range op.PathParams {
		sch, err := paramSchema(p)
		if err != nil {
			return err
		}
		if err := addProp(p.Name, sch, true); err != nil {
			return err
		}
		fixed = append(fixed, p.Name)
	}
	optionalQuery := false
	for _, p := range op.QueryParams {
		sch, err := paramSchema(p)
		if err != nil {
			return err
		}
		if err := addProp(p.Name, sch, p.Required); err != nil {
			return err
		}
		if p.Required {
			fixed = append(fixed, p.Name)
		} else {
			optionalQuery = true
		}
	}

	input := map[string]any{"type": "object"}
	branched := false
	if rb, ok := node["requestBody"]; ok {
		rbm, err := s.deref(rb)
		if err != nil {
			return fmt.Errorf("requestBody: %w", err)
		}
		op.HasBody = true
		op.BodyRequired, _ = rbm["required"].(bool)
		content, _ := rbm["content"].(map[string]any)
		op.MediaTypes = sortedKeys(content)
		if raw, ok := jsonSchemaOf(content); ok {
			op.BodyJSON = true
			bc := s.newConv(modeInput)
			body, err := bc.convert(raw, "requestBody")
			if err != nil {
				return err
			}
			if op.Body, err = bc.document(body); err != nil {
				return err
			}
			if branched, err = s.flattenBody(op, in, raw, input, props, &required, fixed, optionalQuery, addProp); err != nil {
				return err
			}
		}
	}
	if !branched {
		input["properties"] = props
		if len(required) > 0 {
			input["required"] = required
		}
		if _, ok := input["additionalProperties"]; !ok {
			input["additionalProperties"] = false
		}
	}
	var err error
	if op.Input, err = in.document(input); err != nil {
		return err
	}

	// Output: the 200 response, else the first 2xx, with a JSON schema.
	responses, _ := node["responses"].(map[string]any)
	codes := sortedKeys(responses)
	sort.SliceStable(codes, func(i, j int) bool { return codes[i] == "200" && codes[j] != "200" })
	for _, code := range codes {
		if len(code) != 3 || code[0] != '2' {
			continue
		}
		resp, err := s.deref(responses[code])
		if err != nil {
			return fmt.Errorf("response %s: %w", code, err)
		}
		content, _ := resp["content"].(map[string]any)
		raw, ok := jsonSchemaOf(content)
		if !ok {
			op.SuccessStatus = code
			break
		}
		op.SuccessStatus = code
		oc := s.newConv(modeOutput)
		o, err := oc.convert(raw, "response "+code)
		if err != nil {
			return err
		}
		if op.Output, err = oc.document(o); err != nil {
			return err
		}
		ac := s.newConv(modeAdvertised)
		a, err := ac.convert(raw, "response "+code)
		if err != nil {
			return err
		}
		if op.AdvertisedOutput, err = ac.document(lean(a).(map[string]any)); err != nil {
			return err
		}
		break
	}
	return nil
}

// flattenBody merges the JSON body into the input object. branched reports
// that the input root became {type: object, oneOf|anyOf: [closed alternatives]}.
func (s *spec) flattenBody(op *operation, in *conv, raw any, input, props map[string]any, required *[]any,
	fixed []any, optionalQuery bool, addProp func(string, map[string]any, bool) error) (branched bool, err error) {
	m, rec, err := in.resolve(raw, "requestBody")
	if err != nil {
		return false, err
	}
	if m != nil {
		if _, ok := m["allOf"]; ok {
			if merged, ok, err := in.mergeAllOf(m, "requestBody"); err != nil {
				return false, err
			} else if ok {
				m = merged
			}
		}
	}

	// Object body: its properties become top-level input fields.
	if rec == "" && objectShape(m) {
		return false, s.flattenObject(op, in, m, input, fixed, optionalQuery, addProp, "requestBody")
	}

	// oneOf/anyOf of object bodies: one closed input alternative per branch.
	if rec == "" {
		for _, comb := range []string{"oneOf", "anyOf"} {
			branches, ok := m[comb].([]any)
			if !ok || !onlyDocKeys(m, comb) {
				continue
			}
			var alts []any
			fieldSet := map[string]bool{}
			allObjects := true
			var resolved []map[string]any
			for i, b := range branches {
				bm, brec, err := in.resolve(b, fmt.Sprintf("requestBody/%s/%d", comb, i))
				if err != nil {
					return false, err
				}
				if brec == "" {
					if _, ok := bm["allOf"]; ok {
						if merged, ok, err := in.mergeAllOf(bm, "requestBody"); err != nil {
							return false, err
						} else if ok {
							bm = merged
						}
					}
				}
				if brec != "" || !objectShape(bm) {
					allObjects = false
					break
				}
				resolved = append(resolved, bm)
			}
			if !allObjects {
				break
			}
			for i, bm := range resolved {
				bprops := map[string]any{}
				for k, v := range props {
					bprops[k] = v
				}
				breq := append([]any(nil), *required...)
				alt := map[string]any{"type": "object"}
				add := func(name string, sch map[string]any, req bool) error {
					if _, dup := bprops[name]; dup {
						return fmt.Errorf("input field %q is defined twice (parameter and body field?)", name)
					}
					bprops[name] = sch
					if req {
						breq = append(breq, name)
					}
					return nil
				}
				saved := op.BodyFields
				if err := s.flattenObject(op, in, bm, alt, fixed, optionalQuery, add, fmt.Sprintf("requestBody/%s/%d", comb, i)); err != nil {
					return false, err
				}
				for _, f := range op.BodyFields {
					fieldSet[f] = true
				}
				op.BodyFields = saved
				alt["properties"] = bprops
				if len(breq) > 0 {
					alt["required"] = breq
				}
				if _, ok := alt["additionalProperties"]; !ok {
					alt["additionalProperties"] = false
				}
				alts = append(alts, alt)
			}
			op.BodyFields = sortedKeys(fieldSet)
			input[comb] = alts
			if d, ok := m["description"]; ok {
				input["description"] = d
			}
			return true, nil
		}
	}

	// Anything else (array, scalar, free-form object, recursive component):
	// the whole body is one input field named "body".
	sch, err := in.convert(raw, "requestBody")
	if err != nil {
		return false, err
	}
	op.BodyArg = "body"
	op.BodyFields = []string{"body"}
	return false, addProp("body", sch, op.BodyRequired)
}

func onlyDocKeys(m map[string]any, comb string) bool {
	for k := range m {
		if k != comb && k != "description" && k != "title" && k != "example" && k != "type" && !strings.HasPrefix(k, "x-") {
			return false
		}
	}
	return true
}

// flattenObject adds the properties of an object body to the input.
func (s *spec) flattenObject(op *operation, in *conv, m map[string]any, input map[string]any,
	fixed []any, optionalQuery bool, addProp func(string, map[string]any, bool) error, at string) error {
	bprops := m["properties"].(map[string]any)
	breq := map[string]bool{}
	if r, ok := m["required"].([]any); ok {
		for _, x := range r {
			if s, ok := x.(string); ok {
				breq[s] = true
			}
		}
	}
	var fields []string
	for _, name := range sortedKeys(bprops) {
		h, err := in.hidden(bprops[name], at+"/properties/"+name)
		if err != nil {
			return err
		}
		if h {
			continue
		}
		sch, err := in.convert(bprops[name], at+"/properties/"+name)
		if err != nil {
			return err
		}
		if err := addProp(name, sch, breq[name] && op.BodyRequired); err != nil {
			return err
		}
		fields = append(fields, name)
	}
	op.BodyFields = fields
	switch ap := m["additionalProperties"].(type) {
	case nil:
		input["additionalProperties"] = false
	case bool:
		input["additionalProperties"] = ap
		op.BodyRest = ap
	default:
		sch, err := in.convert(ap, at+"/additionalProperties")
		if err != nil {
			return err
		}
		input["additionalProperties"] = sch
		op.BodyRest = true
	}
	if d, ok := m["description"]; ok {
		input["description"] = d
	}
	// minProperties/maxProperties count body fields; the input also holds
	// the always-present parameters, so shift the bounds by their number.
	for _, k := range []string{"minProperties", "maxProperties"} {
		v, ok := m[k]
		if !ok {
			continue
		}
		n, err := v.(json.Number).Int64()
		if err != nil {
			return fmt.Errorf("%s: %s: %w", at, k, err)
		}
		if optionalQuery {
			if k == "minProperties" && n == 1 {
				// At least one body field: anyOf of single requirements.
				var alts []any
				for _, f := range fields {
					alts = append(alts, map[string]any{"required": []any{f}})
				}
				input["anyOf"] = alts
				continue
			}
			return fmt.Errorf("%s: cannot flatten %s with optional query parameters", at, k)
		}
		input[k] = json.Number(fmt.Sprint(n + int64(len(fixed))))
	}
	return nil
}

// lean drops from an advertised output schema what only the strict server-side schema checks
// (descriptions, formats, patterns, bounds, defaults) and keeps its whole structure, opened
// at every object node (SPEC §1: the tool's output schema IS the operation's response
// schema; advertised open so additive changes do not break cached clients). The server
// validates every output against the full strict schema.
func lean(node any) any {
	switch x := node.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, v := range x {
			switch k {
			case "description", "pattern", "format", "minLength", "maxLength", "minimum", "maximum", "minItems", "maxItems", "default", "examples":
				continue
			case "properties", "$defs":
				sub := make(map[string]any, len(v.(map[string]any)))
				for name, s := range v.(map[string]any) {
					sub[name] = lean(s)
				}
				out[k] = sub
			default:
				out[k] = lean(v)
			}
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, v := range x {
			out[i] = lean(v)
		}
		return out
	}
	return node
}
