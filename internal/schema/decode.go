package schema

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// MaxRequestBytes bounds any JSON request body the server decodes over HTTP (fixed, not a
// setting; published in limits.semantics): product limits are smaller and enforced by the
// service, this bound keeps a body from being read without end.
const MaxRequestBytes = 1 << 20

// Errors returned (wrapped) by DecodeStrict and CheckText. Test with errors.Is. None of
// them carries any part of the input; at most a byte offset and a field path.
var (
	ErrInvalidUTF8   = errors.New("invalid UTF-8 in JSON text")
	ErrLoneSurrogate = errors.New("lone UTF-16 surrogate escape in JSON string")
	ErrNUL           = errors.New("NUL character (U+0000) in text")
	ErrTrailingData  = errors.New("trailing data after the JSON value")
	ErrMalformedJSON = errors.New("malformed JSON")
	ErrEmptyJSON     = errors.New("empty JSON document")
	ErrTooDeep       = errors.New("JSON nesting too deep")
)

// maxNesting bounds recursion (encoding/json's own limit); product depth limits are smaller.
const maxNesting = 10000

// DuplicateKeyError is an object naming one member twice (RFC 8259 leaves the meaning to
// the reader; a strict reader refuses it rather than keep one of the two silently). Field is
// the member's path when its name reads as a name (NameLike), else the enclosing object's:
// other names are the caller's text, never echoed.
type DuplicateKeyError struct {
	Field  string
	Offset int // byte offset of the second occurrence
}

func (e *DuplicateKeyError) Error() string {
	s := fmt.Sprintf("a member name appears twice in one object at byte offset %d", e.Offset)
	if e.Field != "" {
		s = e.Field + ": " + s
	}
	return s
}

// DuplicateKeyField returns the field of a DuplicateKeyError in err's chain.
func DuplicateKeyField(err error) (string, bool) {
	var de *DuplicateKeyError
	if errors.As(err, &de) {
		return de.Field, true
	}
	return "", false
}

// TextError is text PostgreSQL cannot store — invalid UTF-8, a lone surrogate escape, or
// U+0000 — found in a string. Field is the path of the value ("payload.note", "files[0].url";
// the enclosing object's path when the text is an object key, which is never echoed).
type TextError struct {
	Field   string
	Problem error // ErrInvalidUTF8, ErrLoneSurrogate or ErrNUL
	Offset  int   // byte offset in the document (-1 for a bare value)
}

func (e *TextError) Error() string {
	s := e.Problem.Error()
	if e.Offset >= 0 {
		s += fmt.Sprintf(" at byte offset %d", e.Offset)
	}
	if e.Field != "" {
		s = e.Field + ": " + s
	}
	return s
}

func (e *TextError) Unwrap() error { return e.Problem }

// TextField returns the field of a TextError in err's chain.
func TextField(err error) (string, bool) {
	var te *TextError
	if errors.As(err, &te) {
		return te.Field, true
	}
	return "", false
}

// CheckText is the text rule for a value that arrives outside JSON (a path segment, a query
// parameter, a header, a form field): valid UTF-8 without U+0000. field names the input.
func CheckText(field, s string) error {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c == 0 {
				return &TextError{Field: field, Problem: ErrNUL, Offset: -1}
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size <= 1 {
			return &TextError{Field: field, Problem: ErrInvalidUTF8, Offset: -1}
		}
		i += size
	}
	return nil
}

// DecodeStrict decodes one JSON value (objects as map[string]any, numbers as json.Number,
// like encoding/json with UseNumber). Unlike encoding/json it rejects — with the field path —
// invalid UTF-8, lone surrogate escapes (which encoding/json silently replaces with U+FFFD)
// and U+0000 in any string or key (PostgreSQL text cannot hold it), and any data after the
// value. The returned error names the problem, a byte offset and a field, never the input.
func DecodeStrict(data []byte) (any, error) {
	d := decoder{data: data}
	d.space()
	if d.i == len(data) {
		return nil, ErrEmptyJSON
	}
	v, err := d.value(0, nil)
	if err != nil {
		return nil, err
	}
	d.space()
	if d.i != len(data) {
		return nil, fmt.Errorf("%w at byte offset %d", ErrTrailingData, d.i)
	}
	return v, nil
}

type decoder struct {
	data []byte
	i    int
}

// pathElem is one step of a field path: an object key or an array index.
type pathElem struct {
	key   string
	index int
	isKey bool
}

// field is the path's text, up to its first key that does not read as a name (NameLike):
// any other key is the caller's text, never sent back, so the path names the object that
// holds it.
func field(path []pathElem) string {
	var b strings.Builder
	for _, p := range path {
		if p.isKey && !NameLike(p.key) {
			break
		}
		if p.isKey {
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(p.key)
		} else {
			b.WriteString("[" + strconv.Itoa(p.index) + "]")
		}
	}
	return b.String()
}

func (d *decoder) malformed() error {
	return fmt.Errorf("%w at byte offset %d", ErrMalformedJSON, d.i)
}

func (d *decoder) space() { d.i = skipSpace(d.data, d.i) }

// skipSpace returns the position of the first byte at or after i that is not JSON white space.
func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

func (d *decoder) value(depth int, path []pathElem) (any, error) {
	if depth > maxNesting {
		return nil, fmt.Errorf("%w at byte offset %d", ErrTooDeep, d.i)
	}
	if d.i >= len(d.data) {
		return nil, d.malformed()
	}
	switch c := d.data[d.i]; {
	case c == '{':
		return d.object(depth, path)
	case c == '[':
		return d.array(depth, path)
	case c == '"':
		return d.str(path, false)
	case c == '-' || (c >= '0' && c <= '9'):
		return d.number()
	default:
		for _, lit := range []struct {
			text string
			v    any
		}{{"true", true}, {"false", false}, {"null", nil}} {
			if strings.HasPrefix(string(d.data[d.i:min(len(d.data), d.i+len(lit.text))]), lit.text) {
				d.i += len(lit.text)
				return lit.v, nil
			}
		}
		if r, size := utf8.DecodeRune(d.data[d.i:]); c >= utf8.RuneSelf && r == utf8.RuneError && size <= 1 {
			return nil, &TextError{Field: field(path), Problem: ErrInvalidUTF8, Offset: d.i}
		}
		return nil, d.malformed()
	}
}

func (d *decoder) object(depth int, path []pathElem) (any, error) {
	d.i++ // {
	m := map[string]any{}
	d.space()
	if d.i < len(d.data) && d.data[d.i] == '}' {
		d.i++
		return m, nil
	}
	for {
		d.space()
		if d.i >= len(d.data) || d.data[d.i] != '"' {
			return nil, d.malformed()
		}
		at := d.i
		k, err := d.str(path, true)
		if err != nil {
			return nil, err
		}
		key := k.(string)
		if _, dup := m[key]; dup {
			f := path
			if NameLike(key) {
				f = append(path[:len(path):len(path)], pathElem{key: key, isKey: true})
			}
			return nil, &DuplicateKeyError{Field: field(f), Offset: at}
		}
		d.space()
		if d.i >= len(d.data) || d.data[d.i] != ':' {
			return nil, d.malformed()
		}
		d.i++
		d.space()
		v, err := d.value(depth+1, append(path, pathElem{key: key, isKey: true}))
		if err != nil {
			return nil, err
		}
		m[key] = v
		d.space()
		if d.i >= len(d.data) {
			return nil, d.malformed()
		}
		switch d.data[d.i] {
		case ',':
			d.i++
		case '}':
			d.i++
			return m, nil
		default:
			return nil, d.malformed()
		}
	}
}

func (d *decoder) array(depth int, path []pathElem) (any, error) {
	d.i++ // [
	a := []any{}
	d.space()
	if d.i < len(d.data) && d.data[d.i] == ']' {
		d.i++
		return a, nil
	}
	for n := 0; ; n++ {
		d.space()
		v, err := d.value(depth+1, append(path, pathElem{index: n}))
		if err != nil {
			return nil, err
		}
		a = append(a, v)
		d.space()
		if d.i >= len(d.data) {
			return nil, d.malformed()
		}
		switch d.data[d.i] {
		case ',':
			d.i++
		case ']':
			d.i++
			return a, nil
		default:
			return nil, d.malformed()
		}
	}
}

// str decodes a string at d.i (its opening quote). A text problem in an object key is
// reported at the object's path: the key itself is never echoed.
func (d *decoder) str(path []pathElem, isKey bool) (any, error) {
	start := d.i
	d.i++ // "
	textErr := func(problem error, at int) error {
		return &TextError{Field: field(path), Problem: problem, Offset: at}
	}
	// Fast path: no escapes and only ASCII.
	j := d.i
	for j < len(d.data) {
		c := d.data[j]
		if c == '"' {
			s := string(d.data[d.i:j])
			d.i = j + 1
			return s, nil
		}
		if c == '\\' || c < 0x20 || c >= utf8.RuneSelf {
			break
		}
		j++
	}
	var b []byte
	b = append(b, d.data[d.i:j]...)
	d.i = j
	for {
		if d.i >= len(d.data) {
			d.i = start
			return nil, d.malformed()
		}
		c := d.data[d.i]
		switch {
		case c == '"':
			d.i++
			return string(b), nil
		case c < 0x20:
			return nil, d.malformed() // control characters must be escaped
		case c >= utf8.RuneSelf:
			r, size := utf8.DecodeRune(d.data[d.i:])
			if r == utf8.RuneError && size <= 1 {
				return nil, textErr(ErrInvalidUTF8, d.i)
			}
			b = append(b, d.data[d.i:d.i+size]...)
			d.i += size
		case c != '\\':
			b = append(b, c)
			d.i++
		default:
			if d.i+1 >= len(d.data) {
				return nil, d.malformed()
			}
			esc := d.data[d.i+1]
			switch esc {
			case '"', '\\', '/':
				b = append(b, esc)
			case 'b':
				b = append(b, '\b')
			case 'f':
				b = append(b, '\f')
			case 'n':
				b = append(b, '\n')
			case 'r':
				b = append(b, '\r')
			case 't':
				b = append(b, '\t')
			case 'u':
				at := d.i
				r, ok := hex4(d.data, d.i+2)
				if !ok {
					return nil, d.malformed()
				}
				d.i += 6
				switch {
				case r == 0:
					return nil, textErr(ErrNUL, at)
				case r >= 0xD800 && r <= 0xDBFF:
					lo, ok := rune(0), false
					if d.i+1 < len(d.data) && d.data[d.i] == '\\' && d.data[d.i+1] == 'u' {
						lo, ok = hex4(d.data, d.i+2)
					}
					if !ok || lo < 0xDC00 || lo > 0xDFFF {
						return nil, textErr(ErrLoneSurrogate, at)
					}
					d.i += 6
					r = utf16.DecodeRune(r, lo)
				case r >= 0xDC00 && r <= 0xDFFF:
					return nil, textErr(ErrLoneSurrogate, at)
				}
				b = utf8.AppendRune(b, r)
				continue
			default:
				return nil, d.malformed()
			}
			d.i += 2
		}
	}
}

// number scans a JSON number (RFC 8259 grammar) and returns it as json.Number.
func (d *decoder) number() (any, error) {
	end, _, ok := scanNumber(d.data, d.i)
	if !ok {
		d.i = end
		return nil, d.malformed()
	}
	start := d.i
	d.i = end
	return json.Number(d.data[start:end]), nil
}

// scanNumber scans the JSON number (RFC 8259 grammar) that starts at b[i] and returns where
// it ends (where it stops being one when !ok) and whether it has neither a fraction nor an
// exponent.
func scanNumber(b []byte, i int) (end int, integer, ok bool) {
	digits := func() int {
		n := 0
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
			n++
		}
		return n
	}
	if i < len(b) && b[i] == '-' {
		i++
	}
	if i < len(b) && b[i] == '0' {
		i++
	} else if digits() == 0 {
		return i, false, false
	}
	integer = true
	if i < len(b) && b[i] == '.' {
		i++
		integer = false
		if digits() == 0 {
			return i, false, false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		integer = false
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if digits() == 0 {
			return i, false, false
		}
	}
	return i, integer, true
}

func hex4(data []byte, at int) (rune, bool) {
	if at+4 > len(data) {
		return 0, false
	}
	var r rune
	for _, c := range data[at : at+4] {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c-'a') + 10
		case c >= 'A' && c <= 'F':
			r |= rune(c-'A') + 10
		default:
			return 0, false
		}
	}
	return r, true
}

// DecodeMessage maps a DecodeStrict or CheckText error to a fixed phrase for an
// INVALID_ARGUMENT message (no value, no offset).
func DecodeMessage(err error) string {
	switch {
	case errors.Is(err, ErrInvalidUTF8):
		return "invalid UTF-8"
	case errors.Is(err, ErrLoneSurrogate):
		return "lone surrogate escape in a string"
	case errors.Is(err, ErrNUL):
		return "NUL character (U+0000) in text"
	case errors.Is(err, ErrTrailingData):
		return "trailing data after the JSON value"
	case errors.Is(err, ErrEmptyJSON):
		return "empty JSON document"
	case errors.Is(err, ErrTooDeep):
		return "nesting too deep"
	case errors.As(err, new(*DuplicateKeyError)):
		return "a member name appears twice in one object"
	default:
		return "malformed JSON"
	}
}
