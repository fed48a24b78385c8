package service

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"strings"
)

// canonicalJSON rewrites one JSON document the way decoding it into `any` (numbers as
// json.Number) and marshalling that with encoding/json would: object keys sorted (the last
// of a repeated key kept), no white space, strings in encoding/json's escaping (HTML
// characters, U+2028 and U+2029 escaped; invalid UTF-8 replaced), numbers as written. It
// does so in one pass, decoding only the strings that need it: the idempotency hash
// (hashArgs) is of this form, and records written before it existed must still match.
func canonicalJSON(b []byte) ([]byte, error) {
	c := canonicalizer{b: b}
	out, err := c.value(nil)
	if err != nil {
		return nil, err
	}
	c.space()
	if c.i != len(c.b) {
		return nil, errNotCanonical
	}
	return out, nil
}

var errNotCanonical = errors.New("service: malformed JSON for the idempotency hash")

type canonicalizer struct {
	b []byte
	i int
}

func (c *canonicalizer) space() {
	for c.i < len(c.b) && (c.b[c.i] == ' ' || c.b[c.i] == '\t' || c.b[c.i] == '\n' || c.b[c.i] == '\r') {
		c.i++
	}
}

// value appends the canonical form of the value at c.i to dst.
func (c *canonicalizer) value(dst []byte) ([]byte, error) {
	c.space()
	if c.i >= len(c.b) {
		return nil, errNotCanonical
	}
	switch ch := c.b[c.i]; {
	case ch == '{':
		return c.object(dst)
	case ch == '[':
		c.i++
		dst = append(dst, '[')
		c.space()
		if c.i < len(c.b) && c.b[c.i] == ']' {
			c.i++
			return append(dst, ']'), nil
		}
		for {
			var err error
			if dst, err = c.value(dst); err != nil {
				return nil, err
			}
			c.space()
			if c.i >= len(c.b) {
				return nil, errNotCanonical
			}
			c.i++
			switch c.b[c.i-1] {
			case ',':
				dst = append(dst, ',')
			case ']':
				return append(dst, ']'), nil
			default:
				return nil, errNotCanonical
			}
		}
	case ch == '"':
		s, err := c.str()
		if err != nil {
			return nil, err
		}
		return appendJSONString(dst, s), nil
	default: // a number or a literal, as written (json.Number marshals as its text)
		start := c.i
		for c.i < len(c.b) && !strings.ContainsRune(",]} \t\n\r", rune(c.b[c.i])) {
			c.i++
		}
		tok := c.b[start:c.i]
		if !json.Valid(tok) {
			return nil, errNotCanonical
		}
		return append(dst, tok...), nil
	}
}

type canonicalMember struct {
	key   string
	value []byte
}

func (c *canonicalizer) object(dst []byte) ([]byte, error) {
	c.i++ // {
	var members []canonicalMember
	var index map[string]int // by key, once an object is large enough for it to pay
	c.space()
	if c.i < len(c.b) && c.b[c.i] == '}' {
		c.i++
		return append(dst, "{}"...), nil
	}
	for {
		c.space()
		if c.i >= len(c.b) || c.b[c.i] != '"' {
			return nil, errNotCanonical
		}
		key, err := c.str()
		if err != nil {
			return nil, err
		}
		c.space()
		if c.i >= len(c.b) || c.b[c.i] != ':' {
			return nil, errNotCanonical
		}
		c.i++
		v, err := c.value(nil)
		if err != nil {
			return nil, err
		}
		k := -1
		if index != nil {
			if at, ok := index[key]; ok {
				k = at
			}
		} else {
			k = slices.IndexFunc(members, func(m canonicalMember) bool { return m.key == key })
		}
		if k >= 0 {
			members[k].value = v // a repeated key keeps its last value, as decoding into a map does
		} else {
			members = append(members, canonicalMember{key, v})
			if index != nil {
				index[key] = len(members) - 1
			} else if len(members) == 16 {
				index = make(map[string]int, 32)
				for at, m := range members {
					index[m.key] = at
				}
			}
		}
		c.space()
		if c.i >= len(c.b) {
			return nil, errNotCanonical
		}
		c.i++
		if c.b[c.i-1] == '}' {
			break
		}
		if c.b[c.i-1] != ',' {
			return nil, errNotCanonical
		}
	}
	slices.SortFunc(members, func(a, b canonicalMember) int { return strings.Compare(a.key, b.key) })
	dst = append(dst, '{')
	for k, m := range members {
		if k > 0 {
			dst = append(dst, ',')
		}
		dst = appendJSONString(dst, m.key)
		dst = append(dst, ':')
		dst = append(dst, m.value...)
	}
	return append(dst, '}'), nil
}

// str decodes the string at c.i (as encoding/json does: invalid UTF-8 and lone surrogates
// become U+FFFD).
func (c *canonicalizer) str() (string, error) {
	start := c.i
	c.i++
	plain := true
	for c.i < len(c.b) {
		switch ch := c.b[c.i]; {
		case ch == '"':
			c.i++
			if plain {
				return string(c.b[start+1 : c.i-1]), nil
			}
			var s string
			if err := json.Unmarshal(c.b[start:c.i], &s); err != nil {
				return "", errNotCanonical
			}
			return s, nil
		case ch == '\\':
			plain = false
			c.i += 2
		default:
			if ch < 0x20 || ch >= 0x80 {
				plain = false
			}
			c.i++
		}
	}
	return "", errNotCanonical
}

// appendJSONString appends s as encoding/json's Marshal writes a string.
func appendJSONString(dst []byte, s string) []byte {
	safe := true
	for k := 0; k < len(s); k++ {
		if ch := s[k]; ch < 0x20 || ch >= 0x80 || ch == '"' || ch == '\\' || ch == '<' || ch == '>' || ch == '&' {
			safe = false
			break
		}
	}
	if safe {
		dst = append(dst, '"')
		dst = append(dst, s...)
		return append(dst, '"')
	}
	var buf bytes.Buffer
	json.NewEncoder(&buf).Encode(s) //nolint:errcheck // a string always encodes
	return append(dst, bytes.TrimSuffix(buf.Bytes(), []byte("\n"))...)
}
