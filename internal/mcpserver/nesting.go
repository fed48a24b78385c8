package mcpserver

// Arguments nested too deep for the SDK.
//
// The official Go SDK (v1.8.0) decodes every JSON-RPC message with its internal/json.Unmarshal
// (jsonrpc2.DecodeMessage, on stdio and on /mcp alike), whose checkMaxDepth refuses a message
// nesting objects and arrays deeper than 1,000 levels (internal/json.defaultMaxDepth), and
// encoding/json (json.Valid, and our reading of the id for a protocol error) refuses one deeper
// than 10,000. Either refusal comes before the message is read as a request: a tools/call
// whose arguments nest that deep was a malformed message (-32600, or -32700 with id null),
// where SPEC §12
// makes arguments the server cannot take an INVALID_ARGUMENT tool error of that call, as the
// HTTP API answers a body nested too deep. So LimitNesting rewrites such a call before the SDK
// (or the /mcp fast path, which must answer as the SDK would) reads it: its arguments become
// tooDeepArguments, which the tool's argument check answers with the HTTP API's error for a
// body nested too deep. A message nested too deep anywhere else is left to the SDK's refusal.
// Upstream, the decoder's bound could apply to the envelope and leave params.arguments (a
// json.RawMessage) to the tool; with that in the SDK this file can go.

import "bytes"

// maxMessageNesting is the SDK's bound on a message's nesting (defaultMaxDepth).
const maxMessageNesting = 1000

// tooDeepArguments stands for arguments nested deeper than the SDK decodes. A client may send
// this very string as its arguments: it is refused either way (arguments are an object).
var tooDeepArguments = []byte(`"(arguments nested deeper than the MCP server decodes)"`)

// LimitNesting returns msg, one JSON-RPC message, as the SDK can decode it: unchanged unless
// it nests deeper than the SDK takes and is a tools/call whose arguments alone make it so; then
// a copy with tooDeepArguments as its arguments. It only walks the bytes (the SDK validates
// what it is handed), and costs one scan of a message longer than the bound.
func LimitNesting(msg []byte) []byte {
	if len(msg) <= maxMessageNesting || !tooDeep(msg) {
		return msg
	}
	var method, params, args [2]int
	if !members(msg, 0, func(key []byte, start, end int) {
		switch string(key) {
		case "method":
			method = [2]int{start, end}
		case "params":
			params = [2]int{start, end}
		}
	}) || string(msg[method[0]:method[1]]) != `"tools/call"` || params[1] == 0 {
		return msg
	}
	if !members(msg, params[0], func(key []byte, start, end int) {
		if string(key) == "arguments" {
			args = [2]int{start, end}
		}
	}) || args[1] == 0 {
		return msg
	}
	out := append(append(append(make([]byte, 0, args[0]+len(tooDeepArguments)+len(msg)-args[1]),
		msg[:args[0]]...), tooDeepArguments...), msg[args[1]:]...)
	if tooDeep(out) {
		return msg // too deep elsewhere too (a duplicate member, another member): the SDK's refusal
	}
	return out
}

// IsTooDeepArguments reports whether raw is what LimitNesting put in place of arguments.
func IsTooDeepArguments(raw []byte) bool { return bytes.Equal(raw, tooDeepArguments) }

// tooDeep is the SDK's checkMaxDepth: objects and arrays nested deeper than
// maxMessageNesting, strings skipped.
func tooDeep(b []byte) bool {
	depth, inString, escaped := 0, false, false
	for _, c := range b {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '{' || c == '[':
			if depth++; depth > maxMessageNesting {
				return true
			}
		case (c == '}' || c == ']') && depth > 0:
			depth--
		}
	}
	return false
}

// members calls fn with the key (as written) and the value's span [start, end) of each member
// of the JSON object at b[i:], however deep its values nest; false if the bytes are not an
// object of that shape.
func members(b []byte, i int, fn func(key []byte, start, end int)) bool {
	i = skipSpace(b, i)
	if i >= len(b) || b[i] != '{' {
		return false
	}
	if i = skipSpace(b, i+1); i < len(b) && b[i] == '}' {
		return true
	}
	for {
		end := skipString(b, i)
		if end < 0 {
			return false
		}
		key := b[i+1 : end-1]
		if i = skipSpace(b, end); i >= len(b) || b[i] != ':' {
			return false
		}
		start := skipSpace(b, i+1)
		if end = skipValue(b, start); end < 0 {
			return false
		}
		fn(key, start, end)
		switch i = skipSpace(b, end); {
		case i < len(b) && b[i] == ',':
			i = skipSpace(b, i+1)
		case i < len(b) && b[i] == '}':
			return true
		default:
			return false
		}
	}
}

// skipValue is the end of the JSON value starting at b[i] (-1: none): a string, a container
// up to its matching bracket, or a literal up to the next delimiter.
func skipValue(b []byte, i int) int {
	start, depth := i, 0
	literalEnd := func(i int) int {
		if i > start {
			return i
		}
		return -1
	}
	for ; i < len(b); i++ {
		switch b[i] {
		case '"':
			end := skipString(b, i)
			if end < 0 || depth == 0 {
				return end
			}
			i = end - 1
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				return literalEnd(i)
			}
			if depth--; depth == 0 {
				return i + 1
			}
		case ',', ' ', '\t', '\r', '\n':
			if depth == 0 {
				return literalEnd(i)
			}
		}
	}
	if depth == 0 {
		return literalEnd(i)
	}
	return -1
}

// skipString is the index after the JSON string starting at b[i] (-1: none).
func skipString(b []byte, i int) int {
	if i >= len(b) || b[i] != '"' {
		return -1
	}
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return -1
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\r' || b[i] == '\n') {
		i++
	}
	return i
}
