package mcpserver

import "bytes"

// Why MCP answers carry <, > and & as themselves.
//
// encoding/json, which the SDK encodes every JSON-RPC message with, writes <, > and & inside
// strings as the six-byte escapes \u003c, \u003e and \u0026 (for JSON embedded in HTML). A tool
// result carries its body twice (structuredContent and the text mirror, SPEC §13.2), so a
// message body of '<' characters came out 12 times its size on /mcp and over stdio (a 32 KiB
// checkpoint of them, 393 KB; the same page over HTTP, 33 KB), far past the tool's
// result_budget_bytes and into the model's context. The escapes and the characters are the
// same JSON value, so every answer is rewritten on its way out (UnescapeHTML) instead of
// re-encoding the SDK's messages ourselves.

// UnescapeHTML appends to dst the JSON text src with every \u003c, \u003e and \u0026 escape
// (either case of hex digit) replaced by the character it stands for: the same JSON value.
// Every other escape is copied as it is, a pair at a time, so an escaped backslash followed
// by "u003c" stays as it was. src may be a piece of a longer text: unless final, an escape
// cut off at the end of src is not written but returned as held, to be put in front of the
// next piece. JSON has backslashes only inside strings, so any JSON text (or SSE framing
// around it) can be passed whole or in pieces.
func UnescapeHTML(dst, src []byte, final bool) (out, held []byte) {
	for i := 0; i < len(src); {
		c := src[i]
		if c != '\\' {
			// Copy the run up to the next backslash at once.
			j := bytes.IndexByte(src[i:], '\\')
			if j < 0 {
				return append(dst, src[i:]...), nil
			}
			dst = append(dst, src[i:i+j]...)
			i += j
			continue
		}
		if i+1 >= len(src) {
			if final {
				return append(dst, src[i:]...), nil
			}
			return dst, src[i:]
		}
		if src[i+1] != 'u' {
			dst = append(dst, src[i], src[i+1])
			i += 2
			continue
		}
		if i+6 > len(src) {
			if final {
				return append(dst, src[i:]...), nil
			}
			return dst, src[i:]
		}
		if ch, ok := htmlEscape(src[i+2 : i+6]); ok {
			dst = append(dst, ch)
		} else {
			dst = append(dst, src[i:i+6]...)
		}
		i += 6
	}
	return dst, nil
}

// htmlEscape reads the four hex digits of a \u escape that encoding/json writes for HTML
// safety.
func htmlEscape(hex []byte) (byte, bool) {
	if hex[0] != '0' || hex[1] != '0' {
		return 0, false
	}
	switch {
	case hex[2] == '3' && (hex[3] == 'c' || hex[3] == 'C'):
		return '<', true
	case hex[2] == '3' && (hex[3] == 'e' || hex[3] == 'E'):
		return '>', true
	case hex[2] == '2' && hex[3] == '6':
		return '&', true
	}
	return 0, false
}
