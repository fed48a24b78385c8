// Package schema is the small JSON Schema runtime used by generated contract
// code (gen/mcp) and by the transports: compiled JSON Schema 2020-12
// validators whose violations never echo the rejected value, and a strict JSON
// decoder that refuses what encoding/json would silently repair.
package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"

	"github.com/agentbox/agentbox/internal/secretlike"
)

// Validator is a compiled JSON Schema 2020-12 (santhosh-tekuri/jsonschema/v6).
// It is safe for concurrent use.
type Validator struct {
	name string
	sch  *jsonschema.Schema
	fast *fastNode // nil when the schema uses keywords the fast path lacks (fast.go)
}

// assertedFormats are the only `format` values that are asserted. Every other
// format the library knows is registered as a no-op, so that annotations such
// as "email" or "uri" never reject input on their own (the service enforces
// its own rules with its own error reasons).
var assertedFormats = map[string]bool{"uuid": true, "date-time": true}

var knownFormats = []string{
	"json-pointer", "relative-json-pointer", "uuid", "duration", "period",
	"ipv4", "ipv6", "hostname", "email", "date", "time", "date-time", "uri",
	"iri", "uri-reference", "iri-reference", "uri-template", "semver", "regex",
	"idn-email", "idn-hostname",
}

// Compile compiles a JSON Schema document. Documents without "$schema" are
// treated as draft 2020-12. Format assertions are enabled for "uuid" and
// "date-time".
func Compile(name string, doc []byte) (*Validator, error) {
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		return nil, fmt.Errorf("schema %s: %w", name, err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	for _, f := range knownFormats {
		if !assertedFormats[f] {
			c.RegisterFormat(&jsonschema.Format{Name: f, Validate: func(any) error { return nil }})
		}
	}
	loc := "https://agentbox.invalid/schemas/" + url.PathEscape(name) + ".json"
	if err := c.AddResource(loc, inst); err != nil {
		return nil, fmt.Errorf("schema %s: %w", name, err)
	}
	sch, err := c.Compile(loc)
	if err != nil {
		return nil, fmt.Errorf("schema %s: %w", name, err)
	}
	v := &Validator{name: name, sch: sch}
	if fast, ok := compileFast(sch); ok && fast != nil {
		v.fast = fast
	}
	return v, nil
}

// MustCompile is Compile that panics on error; for package initialization.
func MustCompile(name string, doc []byte) *Validator {
	v, err := Compile(name, doc)
	if err != nil {
		panic(err)
	}
	return v
}

// Name returns the name the validator was compiled with.
func (v *Validator) Name() string { return v.name }

// Violation describes the first (most specific) place where an instance
// fails its schema. It never contains the rejected value.
type Violation struct {
	Field   string // dotted/indexed path, e.g. "patch.role", "inbox_seqs[3]"; "" for the root
	Keyword string // the failing JSON Schema keyword: "additionalProperties", "required", "type", ...
	Message string // a fixed human-readable phrase; never the value
	Limit   int64  // the schema's bound for maxLength and maxItems (0 otherwise)
}

func (v *Violation) Error() string {
	if v.Field == "" {
		return v.Message
	}
	return v.Field + ": " + v.Message
}

// ValidateJSON decodes doc with DecodeStrict (numbers as json.Number) and
// validates it. A document that cannot be decoded yields a Violation with
// Keyword "json" at the root.
func (v *Validator) ValidateJSON(doc []byte) *Violation {
	if v.Accepts(doc) {
		return nil
	}
	return v.validateJSON(doc)
}

// Accepts reports whether the fast path (fast.go) finds doc valid: true means ValidateJSON
// would return nil; false means only that the general validator has to decide.
func (v *Validator) Accepts(doc []byte) bool {
	if v.fast == nil || !v.fast.accepts(doc) {
		return false
	}
	if crossCheck.Load() {
		if viol := v.validateJSON(doc); viol != nil {
			panic(fmt.Sprintf("schema %s: the fast path accepted a document the validator rejects (%s: %s)", v.name, viol.Field, viol.Keyword))
		}
	}
	return true
}

// crossCheck makes ValidateJSON run the general validator after every fast-path success
// and panic when they disagree (SetCrossCheck).
var crossCheck atomic.Bool

// SetCrossCheck turns the cross-check of the fast path on or off; the test harness
// (testdb.Main) turns it on, so every document a test validates checks the fast path too.
func SetCrossCheck(on bool) { crossCheck.Store(on) }

// validateJSON is ValidateJSON without the fast path.
func (v *Validator) validateJSON(doc []byte) *Violation {
	inst, err := DecodeStrict(doc)
	if err != nil {
		return &Violation{Keyword: "json", Message: DecodeMessage(err)}
	}
	return v.Validate(inst)
}

// Validate checks an instance decoded with encoding/json + UseNumber (or any
// value returned by DecodeStrict). nil means valid.
func (v *Validator) Validate(instance any) *Violation {
	err := v.sch.Validate(instance)
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		// Invalid Go value (not a JSON value); report without detail.
		return &Violation{Keyword: "type", Message: "wrong type"}
	}
	best := pick(ve, instance)
	if best == nil {
		return &Violation{Keyword: "schema", Message: "invalid value"}
	}
	return best.violation(instance)
}

// candidate is one leaf error, ranked for selection.
type candidate struct {
	loc     []string // instance location (tokens)
	prop    string   // property appended for additionalProperties/required
	keyword string
	kind    jsonschema.ErrorKind
}

func (c *candidate) depth() int {
	d := len(c.loc)
	if c.prop != "" {
		d++
	}
	return d
}

var keywordRank = map[string]int{
	"additionalProperties": 0,
	"required":             1,
	"type":                 2,
	"oneOf":                3,
	"anyOf":                3,
}

func rank(k string) int {
	if r, ok := keywordRank[k]; ok {
		return r
	}
	return 10
}

// better reports whether a should be chosen over b: deeper first, then by
// keyword rank, then by keyword name, then by field path.
func better(a, b *candidate, inst any) bool {
	if b == nil {
		return true
	}
	if a.depth() != b.depth() {
		return a.depth() > b.depth()
	}
	if rank(a.keyword) != rank(b.keyword) {
		return rank(a.keyword) < rank(b.keyword)
	}
	if a.keyword != b.keyword {
		return a.keyword < b.keyword
	}
	return a.field(inst) < b.field(inst)
}

// pick walks the error tree and returns the best leaf.
//
// For oneOf/anyOf, alternatives whose shape does not fit the instance (a
// type, unknown-field or missing-field error at the alternative's own
// location) are ignored when another alternative fits; when none fits, or
// the best error is not deeper than the oneOf itself, the oneOf/anyOf is
// reported as such ("does not match any allowed alternative").
func pick(e *jsonschema.ValidationError, inst any) *candidate {
	if len(e.Causes) == 0 {
		return leaf(e)
	}
	switch e.ErrorKind.(type) {
	case *kind.OneOf, *kind.AnyOf:
		depth := len(e.InstanceLocation)
		var best *candidate
		var common map[string]bool // unknown fields every alternative rejects
		for i, c := range e.Causes {
			u := unknownAt(c, depth)
			if i == 0 {
				common = u
			} else {
				for p := range common {
					if !u[p] {
						delete(common, p)
					}
				}
			}
		}
		for _, c := range e.Causes {
			if shapeMismatch(c, depth) {
				continue
			}
			if cand := pick(c, inst); cand != nil && better(cand, best, inst) {
				best = cand
			}
		}
		if best == nil && len(common) > 0 {
			props := make([]string, 0, len(common))
			for p := range common {
				props = append(props, p)
			}
			sort.Strings(props)
			prop := "" // as leaf names it: a name-like key, else the object that holds it
			if i := slices.IndexFunc(props, NameLike); i >= 0 {
				prop = props[i]
			}
			return &candidate{loc: e.InstanceLocation, prop: prop, keyword: "additionalProperties",
				kind: &kind.AdditionalProperties{}}
		}
		if best == nil || best.depth() <= depth {
			return leaf(e)
		}
		return best
	}
	var best *candidate
	for _, c := range e.Causes {
		if cand := pick(c, inst); cand != nil && better(cand, best, inst) {
			best = cand
		}
	}
	return best
}

// unknownAt collects the unknown properties an alternative reports at the
// given depth.
func unknownAt(e *jsonschema.ValidationError, depth int) map[string]bool {
	out := map[string]bool{}
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if k, ok := e.ErrorKind.(*kind.AdditionalProperties); ok && len(e.InstanceLocation) == depth {
			for _, p := range k.Properties {
				out[p] = true
			}
		}
		switch e.ErrorKind.(type) {
		case *kind.OneOf, *kind.AnyOf:
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(e)
	return out
}

// shapeMismatch reports whether an alternative failed at the alternative's
// own instance location on type, unknown or missing fields, or a constant.
func shapeMismatch(e *jsonschema.ValidationError, depth int) bool {
	if len(e.InstanceLocation) == depth {
		switch e.ErrorKind.(type) {
		case *kind.Type, *kind.AdditionalProperties, *kind.Required, *kind.Const, *kind.Enum, *kind.FalseSchema:
			return true
		case *kind.OneOf, *kind.AnyOf:
			return false
		}
	}
	for _, c := range e.Causes {
		if shapeMismatch(c, depth) {
			return true
		}
	}
	return false
}

// NameLike: an unknown key that reads as a name (at most 64 bytes of ASCII letters, digits,
// "_" and "-") is named in the error, which is how a caller finds a misspelt field; any
// other key — markup, spaces, control or non-ASCII characters, or longer — is the caller's
// text, never sent back (SPEC §12), and the error names the object that holds it instead.
func NameLike(key string) bool {
	if key == "" || len(key) > 64 || secretlike.Token(key) { // a token is shaped like a name, too
		return false
	}
	for i := 0; i < len(key); i++ {
		if c := key[i]; !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

func leaf(e *jsonschema.ValidationError) *candidate {
	c := &candidate{loc: e.InstanceLocation, kind: e.ErrorKind}
	switch k := e.ErrorKind.(type) {
	case *kind.AdditionalProperties:
		c.keyword = "additionalProperties"
		p := append([]string(nil), k.Properties...)
		sort.Strings(p)
		if i := slices.IndexFunc(p, NameLike); i >= 0 {
			c.prop = p[i]
		} // else the field is the object that holds the unknown keys
	case *kind.Required:
		c.keyword = "required"
		if len(k.Missing) > 0 {
			p := append([]string(nil), k.Missing...)
			sort.Strings(p)
			c.prop = p[0]
		}
	case *kind.DependentRequired:
		c.keyword = "dependentRequired"
		if len(k.Missing) > 0 {
			p := append([]string(nil), k.Missing...)
			sort.Strings(p)
			c.prop = p[0]
		}
	case *kind.Dependency:
		c.keyword = "dependencies"
		if len(k.Missing) > 0 {
			p := append([]string(nil), k.Missing...)
			sort.Strings(p)
			c.prop = p[0]
		}
	case *kind.FalseSchema:
		c.keyword = "false"
	default:
		if kp := e.ErrorKind.KeywordPath(); len(kp) > 0 {
			c.keyword = kp[0]
		} else {
			c.keyword = "schema"
		}
	}
	return c
}

// field renders the location as "a.b[3].c", using the instance to tell array
// indexes from object keys.
func (c *candidate) field(inst any) string {
	var b strings.Builder
	cur := inst
	for _, tok := range c.loc {
		switch v := cur.(type) {
		case []any:
			b.WriteString("[" + tok + "]")
			if i, err := strconv.Atoi(tok); err == nil && i >= 0 && i < len(v) {
				cur = v[i]
			} else {
				cur = nil
			}
			continue
		case map[string]any:
			cur = v[tok]
		default:
			cur = nil
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(tok)
	}
	if c.prop != "" {
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(c.prop)
	}
	return b.String()
}

func (c *candidate) violation(inst any) *Violation {
	v := &Violation{Field: c.field(inst), Keyword: c.keyword, Message: message(c.kind)}
	switch k := c.kind.(type) {
	case *kind.MaxLength:
		v.Limit = int64(k.Want)
	case *kind.MaxItems:
		v.Limit = int64(k.Want)
	}
	return v
}

func minLengthMessage(n int) string { return fmt.Sprintf("shorter than the minimum length %d", n) }
func maxLengthMessage(n int) string { return fmt.Sprintf("longer than the maximum length %d", n) }

// LengthViolation is the violation a string of n characters makes of the bounds minLen and
// maxLen (-1: none) of field's schema, as Validate reports it; nil within them. For values
// checked outside a JSON document (an HTTP path or query parameter).
func LengthViolation(field string, n, minLen, maxLen int) *Violation {
	switch {
	case n < minLen:
		return &Violation{Field: field, Keyword: "minLength", Message: minLengthMessage(minLen)}
	case maxLen >= 0 && n > maxLen:
		return &Violation{Field: field, Keyword: "maxLength", Message: maxLengthMessage(maxLen), Limit: int64(maxLen)}
	}
	return nil
}

// message renders a fixed phrase for an error kind. It uses only values that
// come from the schema (bounds, expected types, allowed values), never Got.
func message(k jsonschema.ErrorKind) string {
	switch k := k.(type) {
	case *kind.AdditionalProperties:
		return "unknown field"
	case *kind.Required, *kind.DependentRequired, *kind.Dependency:
		return "required field missing"
	case *kind.Type:
		if len(k.Want) > 0 {
			return "wrong type, expected " + strings.Join(k.Want, " or ")
		}
		return "wrong type"
	case *kind.Pattern:
		return "does not match the required pattern"
	case *kind.Format:
		return "is not a valid " + k.Want
	case *kind.MinLength:
		return minLengthMessage(k.Want)
	case *kind.MaxLength:
		return maxLengthMessage(k.Want)
	case *kind.MinItems:
		return fmt.Sprintf("fewer than the minimum %d items", k.Want)
	case *kind.MaxItems:
		return fmt.Sprintf("more than the maximum %d items", k.Want)
	case *kind.MinProperties:
		// Every minProperties of the contract is an update's "change at least one field"; a
		// tool's input counts its box and path fields too, so the number would mislead.
		return "needs at least one field to change"
	case *kind.MaxProperties:
		return fmt.Sprintf("more than the maximum %d fields", k.Want)
	case *kind.Minimum:
		return "below the minimum " + ratString(k.Want)
	case *kind.Maximum:
		return "above the maximum " + ratString(k.Want)
	case *kind.ExclusiveMinimum:
		return "must be greater than " + ratString(k.Want)
	case *kind.ExclusiveMaximum:
		return "must be less than " + ratString(k.Want)
	case *kind.MultipleOf:
		return "is not a multiple of " + ratString(k.Want)
	case *kind.Enum:
		if list := allowedList(k.Want); list != "" {
			return "is not one of the allowed values: " + list
		}
		return "is not one of the allowed values"
	case *kind.Const:
		return "is not the allowed value"
	case *kind.UniqueItems:
		return "items are not unique"
	case *kind.OneOf:
		if k.Subschemas != nil {
			return "matches more than one allowed alternative"
		}
		return "does not match any allowed alternative"
	case *kind.AnyOf:
		return "does not match any allowed alternative"
	case *kind.Not:
		return "matches a forbidden schema"
	case *kind.FalseSchema:
		return "is not allowed"
	case *kind.PropertyNames:
		return "has a field name that is not allowed"
	case *kind.AdditionalItems:
		return "has too many items"
	case *kind.Contains, *kind.MinContains, *kind.MaxContains:
		return "does not contain the required items"
	default:
		return "invalid value"
	}
}

// allowedList is an enum's values as a reader types them (strings bare, others as JSON),
// or "" for a list too long to print in a message.
func allowedList(want []any) string {
	if len(want) == 0 || len(want) > 12 {
		return ""
	}
	parts := make([]string, len(want))
	for i, w := range want {
		if str, ok := w.(string); ok {
			parts[i] = str
			continue
		}
		b, err := json.Marshal(w)
		if err != nil {
			return ""
		}
		parts[i] = string(b)
	}
	return strings.Join(parts, ", ")
}

func ratString(r interface{ RatString() string }) string {
	if r == nil {
		return "?"
	}
	return r.RatString()
}

// HasFastPath reports whether ValidateJSON can accept a valid document without the general
// validator (fast.go).
func (v *Validator) HasFastPath() bool { return v.fast != nil }
