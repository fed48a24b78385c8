package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"unicode/utf8"
)

// Errors returned (wrapped) by DecodeStrict. Test with errors.Is. None of
// them carries any part of the input; at most a byte offset.
var (
	ErrInvalidUTF8    = errors.New("invalid UTF-8 in JSON text")
	ErrLoneSurrogate  = errors.New("lone UTF-16 surrogate escape in JSON string")
	ErrTrailingData   = errors.New("trailing data after the JSON value")
	ErrMalformedJSON  = errors.New("malformed JSON")
	ErrEmptyJSON      = errors.New("empty JSON document")
	errUnterminatedSt = errors.New("unterminated JSON string")
)

// DecodeStrict decodes one JSON value with numbers as json.Number. Unlike
// encoding/json it rejects invalid UTF-8 and lone surrogate escapes (which
// encoding/json silently replaces with U+FFFD) and any data after the value.
// The returned error names the problem and a byte offset, never the input.
func DecodeStrict(data []byte) (any, error) {
	if err := scanText(data); err != nil {
		return nil, err
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, ErrEmptyJSON
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return nil, fmt.Errorf("%w at byte offset %d", ErrMalformedJSON, se.Offset)
		}
		return nil, ErrMalformedJSON
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("%w at byte offset %d", ErrTrailingData, dec.InputOffset())
	}
	return v, nil
}

// scanText checks the raw bytes: valid UTF-8 everywhere, and every \u escape
// inside a string forms a valid code point (a high surrogate immediately
// followed by an escaped low surrogate; no unpaired low surrogate).
func scanText(data []byte) error {
	if !utf8.Valid(data) {
		off := 0
		for off < len(data) {
			r, size := utf8.DecodeRune(data[off:])
			if r == utf8.RuneError && size <= 1 {
				break
			}
			off += size
		}
		return fmt.Errorf("%w at byte offset %d", ErrInvalidUTF8, off)
	}
	inString := false
	for i := 0; i < len(data); i++ {
		c := data[i]
		if !inString {
			if c == '"' {
				inString = true
			}
			continue
		}
		switch c {
		case '"':
			inString = false
		case '\\':
			if i+1 >= len(data) {
				return errUnterminated(i)
			}
			if data[i+1] != 'u' {
				i++ // skip the escaped character
				continue
			}
			cp, ok := hex4(data, i+2)
			if !ok {
				// Malformed escape: leave it to the JSON decoder to report.
				i++
				continue
			}
			switch {
			case cp >= 0xD800 && cp <= 0xDBFF:
				// Must be followed by \uDC00..\uDFFF.
				j := i + 6
				if j+1 < len(data) && data[j] == '\\' && data[j+1] == 'u' {
					if lo, ok := hex4(data, j+2); ok && lo >= 0xDC00 && lo <= 0xDFFF {
						i = j + 5
						continue
					}
				}
				return fmt.Errorf("%w at byte offset %d", ErrLoneSurrogate, i)
			case cp >= 0xDC00 && cp <= 0xDFFF:
				return fmt.Errorf("%w at byte offset %d", ErrLoneSurrogate, i)
			}
			i += 5
		}
	}
	return nil
}

func errUnterminated(off int) error {
	return fmt.Errorf("%w: %w at byte offset %d", ErrMalformedJSON, errUnterminatedSt, off)
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

// DecodeMessage maps a DecodeStrict error to a fixed phrase for an
// INVALID_ARGUMENT message (no value, no offset).
func DecodeMessage(err error) string {
	switch {
	case errors.Is(err, ErrInvalidUTF8):
		return "invalid UTF-8"
	case errors.Is(err, ErrLoneSurrogate):
		return "lone surrogate escape in a string"
	case errors.Is(err, ErrTrailingData):
		return "trailing data after the JSON value"
	case errors.Is(err, ErrEmptyJSON):
		return "empty JSON document"
	default:
		return "malformed JSON"
	}
}
