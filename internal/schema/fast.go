package schema

import (
	"bytes"
	"encoding/json"
	"math/big"
	"math/bits"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// The fast path: every response is validated against its output schema before COMMIT, and
// decoding a response into maps to walk it with the general validator cost more than the
// rest of the server's work on a large one (a 50-item inbox_claim: 44% of the server's CPU in
// the W4 drain, most of it allocation). The output schemas use a small subset of JSON Schema
// (type, properties, required, additionalProperties, items, maxItems, enum, format, pattern,
// maxLength), so a validator of exactly that subset walks the bytes themselves, allocating
// nothing on the common path, and reuses the compiled schema's own format and pattern
// checks. It answers only "valid" or "don't know": anything it does not handle, or that
// fails, goes to the general validator, which alone reports violations. So it can never
// change a verdict the general validator would give, only skip it when the document is
// valid. (In test binaries both run on every document and must agree: SetCrossCheck.)

// fastNode is one compiled schema node of the fast path.
type fastNode struct {
	types     uint8             // allowed JSON types (fastNull...); 0 allows every type
	enum      []*string         // allowed values (nil pointer: null); nil when no enum
	format    func([]byte) bool // nil without format
	pattern   jsonschema.Regexp
	maxLength int // -1 without maxLength
	minLength int // 0 without minLength
	// integers: bounds as int64 (ok only when the schema's bounds are integers that fit)
	min, max       int64
	hasMin, hasMax bool
	// objects: properties by name, the required ones by index into a bit set
	props         map[string]*fastProp
	required      uint64
	minProperties int       // 0 without minProperties
	additional    *fastNode // with additionalAny false: nil denies other properties
	addAny        bool      // other properties may hold anything
	// arrays
	items    *fastNode // nil: any items
	maxItems int       // -1 without maxItems
	minItems int       // 0 without minItems
}

type fastProp struct {
	node *fastNode // nil: anything
	bit  uint64    // its own bit in a set of the object's properties
}

const (
	fastNull uint8 = 1 << iota
	fastBool
	fastInteger
	fastNumber // any number, integers included
	fastString
	fastArray
	fastObject
)

// compileFast builds the fast path of a compiled schema; ok is false when the schema uses a
// keyword the fast path does not implement (then only the general validator runs).
func compileFast(s *jsonschema.Schema) (n *fastNode, ok bool) {
	if s == nil {
		return nil, true
	}
	if s.Bool != nil || s.Ref != nil || s.RecursiveRef != nil || s.DynamicRef != nil || s.Const != nil ||
		s.Not != nil || s.AllOf != nil || s.AnyOf != nil || s.OneOf != nil || s.If != nil || s.Then != nil || s.Else != nil ||
		s.MaxProperties != nil || s.PropertyNames != nil || s.PatternProperties != nil ||
		s.Dependencies != nil || s.DependentRequired != nil || s.DependentSchemas != nil || s.UnevaluatedProperties != nil ||
		s.UniqueItems || s.Contains != nil || s.MinContains != nil || s.MaxContains != nil ||
		s.Items != nil || s.AdditionalItems != nil || s.PrefixItems != nil || s.UnevaluatedItems != nil ||
		s.ContentEncoding != nil || s.ContentMediaType != nil || s.ContentSchema != nil ||
		s.ExclusiveMaximum != nil || s.ExclusiveMinimum != nil || s.MultipleOf != nil || s.Extensions != nil {
		return nil, false
	}
	n = &fastNode{maxLength: -1, maxItems: -1, addAny: true}
	if s.Types != nil {
		for _, t := range s.Types.ToStrings() {
			switch t {
			case "null":
				n.types |= fastNull
			case "boolean":
				n.types |= fastBool
			case "integer":
				n.types |= fastInteger
			case "number":
				n.types |= fastNumber | fastInteger
			case "string":
				n.types |= fastString
			case "array":
				n.types |= fastArray
			case "object":
				n.types |= fastObject
			default:
				return nil, false
			}
		}
	}
	if s.Enum != nil {
		n.enum = []*string{}
		for _, v := range s.Enum.Values {
			switch v := v.(type) {
			case string:
				n.enum = append(n.enum, &v)
			case nil:
				n.enum = append(n.enum, nil)
			default:
				return nil, false
			}
		}
	}
	if s.Format != nil {
		n.format = fastFormat(s.Format)
	}
	n.pattern = s.Pattern
	if s.MaxLength != nil {
		n.maxLength = *s.MaxLength
	}
	if s.MaxItems != nil {
		n.maxItems = *s.MaxItems
	}
	if s.MinItems != nil {
		n.minItems = *s.MinItems
	}
	if s.MinLength != nil {
		n.minLength = *s.MinLength
	}
	if s.MinProperties != nil {
		n.minProperties = *s.MinProperties
	}
	if s.Minimum != nil {
		if n.min, ok = ratInt64(s.Minimum); !ok {
			return nil, false
		}
		n.hasMin = true
	}
	if s.Maximum != nil {
		if n.max, ok = ratInt64(s.Maximum); !ok {
			return nil, false
		}
		n.hasMax = true
	}
	if len(s.Properties) > 0 || len(s.Required) > 0 {
		n.props = make(map[string]*fastProp, len(s.Properties))
		add := func(name string, ps *jsonschema.Schema) bool {
			if len(n.props) == 64 { // one bit each
				return false
			}
			pn, ok := compileFast(ps)
			n.props[name] = &fastProp{node: pn, bit: 1 << len(n.props)}
			return ok
		}
		for name, ps := range s.Properties {
			if !add(name, ps) {
				return nil, false
			}
		}
		for _, name := range s.Required {
			if n.props[name] == nil && !add(name, nil) { // required without a property schema: anything
				return nil, false
			}
			n.required |= n.props[name].bit
		}
	}
	switch a := s.AdditionalProperties.(type) {
	case nil:
	case bool:
		n.addAny = a
	case *jsonschema.Schema:
		an, ok := compileFast(a)
		if !ok {
			return nil, false
		}
		n.additional, n.addAny = an, an == nil
	default:
		return nil, false
	}
	if s.Items2020 != nil {
		in, ok := compileFast(s.Items2020)
		if !ok {
			return nil, false
		}
		n.items = in
	}
	return n, true
}

// accepts reports whether doc is certainly one JSON value valid under n (false: not known).
func (n *fastNode) accepts(doc []byte) bool {
	sc := fastScanner{b: doc}
	sc.space()
	if !sc.value(n, 0) {
		return false
	}
	sc.space()
	return sc.i == len(sc.b)
}

// fastScanner walks a JSON document against fast nodes. Each method returns false as soon
// as it is not sure the value is valid; the position is then meaningless.
type fastScanner struct {
	b []byte
	i int
}

func (sc *fastScanner) space() { sc.i = skipSpace(sc.b, sc.i) }

// value checks the value at sc.i against n (nil: any value).
func (sc *fastScanner) value(n *fastNode, depth int) bool {
	if depth > maxNesting || sc.i >= len(sc.b) {
		return false
	}
	allows := func(t uint8) bool { return n == nil || n.types == 0 || n.types&t != 0 }
	switch c := sc.b[sc.i]; {
	case c == '{':
		return allows(fastObject) && (n == nil || n.enum == nil) && sc.object(n, depth)
	case c == '[':
		return allows(fastArray) && (n == nil || n.enum == nil) && sc.array(n, depth)
	case c == '"':
		return allows(fastString) && sc.str(n)
	case c == '-' || (c >= '0' && c <= '9'):
		start := sc.i
		integer, ok := sc.number()
		if !ok || (n != nil && n.enum != nil) {
			return false
		}
		if n != nil && (n.hasMin || n.hasMax) {
			// Bounds are checked on integers that fit an int64 only; anything else is not known.
			v, ok := parseInt64(sc.b[start:sc.i])
			if !integer || !ok || (n.hasMin && v < n.min) || (n.hasMax && v > n.max) {
				return false
			}
		}
		// A number with a fraction or an exponent may still be an integer for JSON Schema
		// (1.0): not known here.
		return allows(fastNumber) || (integer && allows(fastInteger))
	default:
		for _, lit := range []string{"true", "false", "null"} {
			if len(sc.b)-sc.i >= len(lit) && string(sc.b[sc.i:sc.i+len(lit)]) == lit {
				sc.i += len(lit)
				if lit == "null" {
					return allows(fastNull) && (n == nil || n.enum == nil || n.enumHas(nil))
				}
				return allows(fastBool) && (n == nil || n.enum == nil)
			}
		}
		return false
	}
}

func (n *fastNode) enumHas(s *string) bool {
	for _, e := range n.enum {
		if (e == nil) == (s == nil) && (e == nil || *e == *s) {
			return true
		}
	}
	return false
}

func (sc *fastScanner) object(n *fastNode, depth int) bool {
	sc.i++ // {
	var seen uint64
	other := false // a member without a property schema: the distinct count is not known
	// The names of members without a property schema, to refuse a name given twice (the
	// slow path says so: DuplicateKeyError); the declared ones are told apart by seen. An
	// object with more such names than fit here, or one written with escapes, takes the
	// slow path.
	var names [16][]byte
	nNames := 0
	sc.space()
	if sc.i < len(sc.b) && sc.b[sc.i] == '}' {
		sc.i++
		return n == nil || (n.required == 0 && n.minProperties == 0)
	}
	for {
		sc.space()
		if sc.i >= len(sc.b) || sc.b[sc.i] != '"' {
			return false
		}
		p, raw, escaped, ok := sc.key(n)
		if !ok {
			return false
		}
		if p != nil {
			if seen&p.bit != 0 {
				return false
			}
		} else {
			if escaped || nNames == len(names) {
				return false
			}
			for _, name := range names[:nNames] {
				if bytes.Equal(name, raw) {
					return false
				}
			}
			names[nNames] = raw
			nNames++
		}
		var vn *fastNode
		if n != nil {
			if p != nil {
				vn, seen = p.node, seen|p.bit
			} else if n.additional != nil {
				vn, other = n.additional, true
			} else if !n.addAny {
				return false
			} else {
				other = true
			}
		}
		sc.space()
		if sc.i >= len(sc.b) || sc.b[sc.i] != ':' {
			return false
		}
		sc.i++
		sc.space()
		if !sc.value(vn, depth+1) {
			return false
		}
		sc.space()
		if sc.i >= len(sc.b) {
			return false
		}
		switch sc.b[sc.i] {
		case ',':
			sc.i++
		case '}':
			sc.i++
			if n == nil {
				return true
			}
			if n.minProperties > 0 && (other || bits.OnesCount64(seen) < n.minProperties) {
				return false
			}
			return seen&n.required == n.required
		default:
			return false
		}
	}
}

func (sc *fastScanner) array(n *fastNode, depth int) bool {
	sc.i++ // [
	var items *fastNode
	maxItems, minItems := -1, 0
	if n != nil {
		items, maxItems, minItems = n.items, n.maxItems, n.minItems
	}
	sc.space()
	if sc.i < len(sc.b) && sc.b[sc.i] == ']' {
		sc.i++
		return minItems == 0
	}
	for count := 1; ; count++ {
		if maxItems >= 0 && count > maxItems {
			return false
		}
		sc.space()
		if !sc.value(items, depth+1) {
			return false
		}
		sc.space()
		if sc.i >= len(sc.b) {
			return false
		}
		switch sc.b[sc.i] {
		case ',':
			sc.i++
		case ']':
			sc.i++
			return count >= minItems
		default:
			return false
		}
	}
}

// span scans the string at sc.i (its opening quote) by the rules of DecodeStrict (valid
// UTF-8, no control character, no U+0000 escape, no lone surrogate) and returns its raw
// contents and whether they hold an escape.
func (sc *fastScanner) span() (raw []byte, escaped, ok bool) {
	sc.i++ // "
	start := sc.i
	ascii := true
	for sc.i < len(sc.b) {
		c := sc.b[sc.i]
		switch {
		case c == '"':
			raw = sc.b[start:sc.i]
			sc.i++
			return raw, escaped, ascii || utf8.Valid(raw)
		case c < 0x20:
			return nil, false, false
		case c >= utf8.RuneSelf:
			ascii = false
			sc.i++
		case c != '\\':
			sc.i++
		default:
			escaped = true
			if sc.i+1 >= len(sc.b) {
				return nil, false, false
			}
			switch sc.b[sc.i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				sc.i += 2
			case 'u':
				r, ok := hex4(sc.b, sc.i+2)
				switch {
				case !ok || r == 0 || (r >= 0xDC00 && r <= 0xDFFF):
					return nil, false, false
				case r >= 0xD800 && r <= 0xDBFF: // a high surrogate: a low one must follow
					lo, ok := rune(0), false
					if sc.i+7 < len(sc.b) && sc.b[sc.i+6] == '\\' && sc.b[sc.i+7] == 'u' {
						lo, ok = hex4(sc.b, sc.i+8)
					}
					if !ok || lo < 0xDC00 || lo > 0xDFFF {
						return nil, false, false
					}
					sc.i += 6
				}
				sc.i += 6
			default:
				return nil, false, false
			}
		}
	}
	return nil, false, false
}

// key scans an object key and returns its property (nil when it has none) in n, and ok.
// key reads a member name: its property schema in n (nil when it has none) and its raw
// bytes between the quotes (escaped: written with a backslash escape).
func (sc *fastScanner) key(n *fastNode) (p *fastProp, raw []byte, escaped, ok bool) {
	raw, escaped, ok = sc.span()
	if !ok {
		return nil, nil, false, false
	}
	if n == nil {
		return nil, raw, escaped, true
	}
	if !escaped {
		return n.props[string(raw)], raw, false, true // indexing with string(raw) does not allocate
	}
	var s string
	if json.Unmarshal(sc.b[sc.i-len(raw)-2:sc.i], &s) != nil {
		return nil, nil, false, false
	}
	return n.props[s], raw, true, true
}

// str checks the string at sc.i against n's string keywords.
func (sc *fastScanner) str(n *fastNode) bool {
	at := sc.i
	raw, escaped, ok := sc.span()
	if !ok {
		return false
	}
	if n == nil || (n.enum == nil && n.format == nil && n.pattern == nil && n.maxLength < 0 && n.minLength == 0) {
		return true
	}
	if escaped {
		var s string
		if json.Unmarshal(sc.b[at:sc.i], &s) != nil {
			return false
		}
		raw = []byte(s)
	}
	if n.enum != nil && !n.enumHasBytes(raw) {
		return false
	}
	if n.maxLength >= 0 || n.minLength > 0 {
		if k := utf8.RuneCount(raw); (n.maxLength >= 0 && k > n.maxLength) || k < n.minLength {
			return false
		}
	}
	if n.pattern != nil {
		if m, ok := n.pattern.(interface{ Match([]byte) bool }); ok { // *regexp.Regexp, the default engine
			if !m.Match(raw) {
				return false
			}
		} else if !n.pattern.MatchString(string(raw)) {
			return false
		}
	}
	return n.format == nil || n.format(raw)
}

func (n *fastNode) enumHasBytes(b []byte) bool {
	for _, e := range n.enum {
		if e != nil && *e == string(b) {
			return true
		}
	}
	return false
}

// fastFormat returns the check of a format: for uuid and date-time (the asserted ones) a
// check of its own that allocates nothing and accepts a subset of what the compiled
// schema's check accepts; for any other, that check.
func fastFormat(f *jsonschema.Format) func([]byte) bool {
	switch f.Name {
	case "uuid":
		return fastUUID
	case "date-time":
		return fastDateTime
	}
	return func(b []byte) bool { return f.Validate(string(b)) == nil }
}

// IsUUID reports whether s is a UUID in the form the uuid format accepts (what a path
// parameter of that format must be too: parsers that also take {…}, urn:uuid: or bare hex
// would let one ID have several spellings).
func IsUUID(s string) bool { return fastUUID([]byte(s)) }

// fastUUID: five groups of 8-4-4-4-12 hexadecimal digits joined by hyphens (RFC 4122), what
// the uuid format accepts.
func fastUUID(b []byte) bool {
	if len(b) != 36 {
		return false
	}
	for i, c := range b {
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !isHex(c) {
				return false
			}
		}
	}
	return true
}

func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

// fastDateTime: RFC 3339 date-time as YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM), a real
// calendar date, hours 00-23, minutes and seconds 00-59 (no leap second: the general check
// decides those).
func fastDateTime(b []byte) bool {
	if len(b) < 20 || b[4] != '-' || b[7] != '-' || (b[10] != 'T' && b[10] != 't') || b[13] != ':' || b[16] != ':' {
		return false
	}
	num := func(i, n int) (int, bool) {
		v := 0
		for _, c := range b[i : i+n] {
			if c < '0' || c > '9' {
				return 0, false
			}
			v = v*10 + int(c-'0')
		}
		return v, true
	}
	year, ok1 := num(0, 4)
	month, ok2 := num(5, 2)
	day, ok3 := num(8, 2)
	hour, ok4 := num(11, 2)
	minute, ok5 := num(14, 2)
	sec, ok6 := num(17, 2)
	if !ok1 || !ok2 || !ok3 || !ok4 || !ok5 || !ok6 || month < 1 || month > 12 || day < 1 || hour > 23 || minute > 59 || sec > 59 {
		return false
	}
	days := [13]int{0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31}[month]
	if month == 2 && year%4 == 0 && (year%100 != 0 || year%400 == 0) {
		days = 29
	}
	if day > days {
		return false
	}
	rest := b[19:]
	if len(rest) > 0 && rest[0] == '.' {
		k := 1
		for k < len(rest) && rest[k] >= '0' && rest[k] <= '9' {
			k++
		}
		if k == 1 {
			return false
		}
		rest = rest[k:]
	}
	if len(rest) == 1 {
		return rest[0] == 'Z' || rest[0] == 'z'
	}
	if len(rest) != 6 || (rest[0] != '+' && rest[0] != '-') || rest[3] != ':' {
		return false
	}
	for _, i := range []int{1, 2, 4, 5} {
		if rest[i] < '0' || rest[i] > '9' {
			return false
		}
	}
	return (rest[1]-'0')*10+(rest[2]-'0') <= 23 && (rest[4]-'0')*10+(rest[5]-'0') <= 59
}

// number scans a JSON number; integer: it has neither a fraction nor an exponent.
func (sc *fastScanner) number() (integer, ok bool) {
	sc.i, integer, ok = scanNumber(sc.b, sc.i)
	return integer, ok
}

// ObjectMembers calls fn with each member of the JSON object doc, in document order: its
// key's raw bytes (nil when the key holds an escape sequence) and its value's bytes. It
// reports false when fn does, or when doc is not one object well-formed by DecodeStrict's
// rules with nothing but white space around it. For a caller that needs a few members of
// a small document without decoding it into a map.
func ObjectMembers(doc []byte, fn func(key, value []byte) bool) bool {
	sc := fastScanner{b: doc}
	sc.space()
	if sc.i >= len(sc.b) || sc.b[sc.i] != '{' {
		return false
	}
	sc.i++
	sc.space()
	if sc.i < len(sc.b) && sc.b[sc.i] == '}' {
		sc.i++
	} else {
		for {
			sc.space()
			if sc.i >= len(sc.b) || sc.b[sc.i] != '"' {
				return false
			}
			key, escaped, ok := sc.span()
			if !ok {
				return false
			}
			if escaped {
				key = nil
			}
			sc.space()
			if sc.i >= len(sc.b) || sc.b[sc.i] != ':' {
				return false
			}
			sc.i++
			sc.space()
			start := sc.i
			if !sc.value(nil, 1) || !fn(key, sc.b[start:sc.i]) {
				return false
			}
			sc.space()
			if sc.i >= len(sc.b) {
				return false
			}
			if sc.b[sc.i] == '}' {
				sc.i++
				break
			}
			if sc.b[sc.i] != ',' {
				return false
			}
			sc.i++
		}
	}
	sc.space()
	return sc.i == len(sc.b)
}

// ratInt64 is r as an int64 when it is an integer that fits one.
func ratInt64(r *big.Rat) (int64, bool) {
	if !r.IsInt() || !r.Num().IsInt64() {
		return 0, false
	}
	return r.Num().Int64(), true
}

// parseInt64 reads an integer literal (-?digits) that fits an int64.
func parseInt64(b []byte) (int64, bool) {
	neg := len(b) > 0 && b[0] == '-'
	if neg {
		b = b[1:]
	}
	if len(b) == 0 || len(b) > 18 { // up to 18 digits cannot overflow
		return 0, false
	}
	var v int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + int64(c-'0')
	}
	if neg {
		v = -v
	}
	return v, true
}
