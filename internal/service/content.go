package service

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/agentbox/agentbox/gen/api"
	"github.com/agentbox/agentbox/internal/apierr"
	"github.com/agentbox/agentbox/internal/schema"
	"github.com/agentbox/agentbox/internal/secretlike"
	"github.com/agentbox/agentbox/internal/upload"
)

// Content rules of a send (SPEC §6, §15): body, payload, file references, the envelope cap,
// and the duplicate-suppression key. Pure functions of the input and the box's settings, checked
// before a send locks or writes anything.

// sendContent is the validated, storable content shared by every copy of a send.
type sendContent struct {
	body      string
	payload   []byte // compact JSON object, nil when absent
	files     []api.FileRef
	filesJSON []byte
	upload    *upload.File // the uploaded attachment (HTTP/CLI only); nil when none
	hash      []byte       // consecutive-duplicate key
}

// validateContent checks body, payload, file references and the uploaded attachment (nil
// when none) against the box's limits. Only a send with an uploaded attachment may have an
// empty body.
func validateContent(body string, payload *json.RawMessage, files *[]api.FileRefInput, att *upload.File, s api.SettingsValues) (sendContent, error) {
	var c sendContent
	if body == "" && att == nil {
		return c, apierr.Invalid("body_md", "must not be empty").WithReason("body_empty")
	}
	if att != nil && att.SizeBytes > s.AttachmentMaxBytes { // the transport staged it under the same cap
		return c, apierr.TooLarge("file", upload.ReasonTooLarge, s.AttachmentMaxBytes)
	}
	c.upload = att
	if !utf8.ValidString(body) {
		return c, apierr.Invalid("body_md", "must be valid UTF-8").WithReason("invalid_utf8")
	}
	if int64(len(body)) > s.BodyMaxBytes {
		return c, apierr.TooLarge("body_md", "body_too_large", s.BodyMaxBytes)
	}
	c.body = body
	if payload != nil {
		p, err := validatePayload(*payload, s)
		if err != nil {
			return c, err
		}
		c.payload = p
	}
	refs, err := fileRefs(files)
	if err != nil {
		return c, err
	}
	c.files = refs
	if c.filesJSON, err = compactJSON(refs); err != nil {
		return c, err
	}
	var attMeta []byte
	if att != nil {
		if attMeta, err = compactJSON(attachmentIdentity(att)); err != nil {
			return c, err
		}
	}
	c.hash = contentHash(c.body, c.payload, c.filesJSON, attMeta)
	return c, nil
}

// attachmentMeta is what identifies an uploaded attachment's content: the duplicate key's
// attachment part, an envelope member, and part of a mutation's idempotency arguments.
type attachmentMeta struct {
	Name      string `json:"name"`
	MediaType string `json:"media_type"`
	SizeBytes int64  `json:"size_bytes"`
	SHA256    string `json:"sha256"`
}

// attachmentIdentity is att's metadata; nil when there is no attachment.
func attachmentIdentity(att *upload.File) *attachmentMeta {
	if att == nil {
		return nil
	}
	return &attachmentMeta{Name: att.Name, MediaType: att.MediaType, SizeBytes: att.SizeBytes, SHA256: att.SHA256}
}

// validatePayload returns the payload's compact serialization after the size, depth and
// credential rules. Keys keep the order they were sent in; each string is written in its
// one shortest form (unescapedStrings), so the size cap and the duplicate key measure the
// value, not how the client's encoder escaped it (Python escapes every non-ASCII
// character by default, Go escapes <, > and &).
func validatePayload(raw json.RawMessage, s api.SettingsValues) ([]byte, error) {
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil || !utf8.Valid(buf.Bytes()) || loneSurrogate(buf.Bytes()) {
		return nil, apierr.Invalid("payload", "must be a JSON object")
	}
	canonical, err := unescapedStrings(buf.Bytes())
	if err != nil {
		return nil, apierr.Invalid("payload", "must be a JSON object")
	}
	buf.Reset()
	buf.Write(canonical)
	if int64(buf.Len()) > s.PayloadMaxBytes {
		return nil, apierr.TooLarge("payload", "payload_too_large", s.PayloadMaxBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(buf.Bytes()))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, apierr.Invalid("payload", "must be a JSON object")
	}
	if _, ok := v.(map[string]any); !ok {
		return nil, apierr.Invalid("payload", "must be a JSON object")
	}
	depth, beyond := scanJSON(buf.Bytes())
	if depth > s.PayloadMaxDepth {
		return nil, apierr.TooLarge("payload", "payload_too_deep", s.PayloadMaxDepth)
	}
	if beyond {
		return nil, errBeyondFloat64("payload")
	}
	if path, found := credentialIn(v, "payload"); found {
		return nil, apierr.Invalid(path, "payload must not carry credentials (a credential-like key or a token-like value)").
			WithReason("credential_in_payload")
	}
	return buf.Bytes(), nil
}

// unescapedStrings rewrites each string of compact JSON (valid, no lone surrogate) in its
// shortest form: escaped only where JSON requires it (quote, backslash, control characters),
// every other character as its UTF-8 bytes. Everything outside strings is copied as is.
func unescapedStrings(compact []byte) ([]byte, error) {
	if !bytes.Contains(compact, []byte{'\\'}) {
		return compact, nil // no escape anywhere: already in that form
	}
	out := make([]byte, 0, len(compact))
	for i := 0; i < len(compact); i++ {
		if compact[i] != '"' {
			out = append(out, compact[i])
			continue
		}
		end, escaped := i+1, false
		for ; end < len(compact) && compact[end] != '"'; end++ {
			if compact[end] == '\\' {
				escaped = true
				end++
			}
		}
		if end >= len(compact) {
			return nil, errors.New("unterminated string")
		}
		token := compact[i : end+1]
		i = end
		if !escaped {
			out = append(out, token...)
			continue
		}
		var str string
		if err := json.Unmarshal(token, &str); err != nil {
			return nil, err
		}
		out = appendShortestString(out, str)
	}
	return out, nil
}

// appendShortestString appends s as a JSON string escaped only where JSON requires it.
func appendShortestString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			dst = append(dst, '\\', c)
		case c == '\n':
			dst = append(dst, '\\', 'n')
		case c == '\r':
			dst = append(dst, '\\', 'r')
		case c == '\t':
			dst = append(dst, '\\', 't')
		case c < 0x20:
			dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		default:
			dst = append(dst, c)
		}
	}
	return append(dst, '"')
}

// loneSurrogate reports a \uD800-\uDFFF escape that is not part of a surrogate pair (the
// transport rejects these already; decoding would silently turn them into U+FFFD).
func loneSurrogate(compact []byte) bool {
	hex4 := func(i int) (uint64, bool) {
		if i+6 > len(compact) || compact[i] != '\\' || compact[i+1] != 'u' {
			return 0, false
		}
		v, err := strconv.ParseUint(string(compact[i+2:i+6]), 16, 16)
		return v, err == nil
	}
	for i := 0; i < len(compact); i++ {
		if compact[i] != '\\' {
			continue
		}
		v, ok := hex4(i)
		if !ok {
			i++ // skip the escaped character (e.g. \\)
			continue
		}
		switch {
		case v >= 0xDC00 && v <= 0xDFFF:
			return true
		case v >= 0xD800 && v <= 0xDBFF:
			lo, ok := hex4(i + 6)
			if !ok || lo < 0xDC00 || lo > 0xDFFF {
				return true
			}
			i += 11
		default:
			i += 5
		}
	}
	return false
}

// scanJSON reads compact JSON (valid) once, outside its strings: the deepest nesting of
// objects and arrays (the top-level object is 1), and whether a number no 64-bit float can
// hold (1e400) appears — valid JSON, but JSON clients read it back as Infinity or fail on it
// (I-JSON, RFC 7493 §2.2), so it is refused rather than stored as sent.
func scanJSON(compact []byte) (deepest int64, beyondFloat64 bool) {
	var depth int64
	inString, escaped := false, false
	for i := 0; i < len(compact); i++ {
		b := compact[i]
		switch {
		case inString && escaped:
			escaped = false
		case inString && b == '\\':
			escaped = true
		case b == '"':
			inString = !inString
		case inString:
		case b == '{' || b == '[':
			depth++
			deepest = max(deepest, depth)
		case b == '}' || b == ']':
			depth--
		case b == '-' || (b >= '0' && b <= '9'):
			j := i + 1
			for j < len(compact) && strings.IndexByte("+-.eE0123456789", compact[j]) >= 0 {
				j++
			}
			if _, err := strconv.ParseFloat(string(compact[i:j]), 64); err != nil {
				beyondFloat64 = true
			}
			i = j - 1
		}
	}
	return deepest, beyondFloat64
}

// errBeyondFloat64 refuses a JSON object field holding a number beyond float64 (scanJSON).
func errBeyondFloat64(field string) error {
	return apierr.Invalid(field, "holds a number beyond the 64-bit floating-point range, which JSON clients cannot read back").
		WithReason("number_out_of_range")
}

// credentialIn walks a decoded payload and returns the path of the first credential-like key
// or token-like string (the path names where, never the value). Object keys are visited in
// sorted order, so the reported path is deterministic.
func credentialIn(v any, path string) (string, bool) {
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			if looksLikeToken(k) {
				return path, true // the key itself is secret: do not echo it
			}
			if !schema.NameLike(k) { // the caller's text, not a name: the path names its object
				if _, ok := credentialIn(x[k], path); ok || credentialKey(k) {
					return path, true
				}
				continue
			}
			child := path + "." + k
			if credentialKey(k) {
				return child, true
			}
			if p, ok := credentialIn(x[k], child); ok {
				return p, true
			}
		}
	case []any:
		for i, e := range x {
			if p, ok := credentialIn(e, fieldIndex(path, i)); ok {
				return p, true
			}
		}
	case string:
		if looksLikeToken(x) {
			return path, true
		}
	}
	return "", false
}

// credentialTerms are the word sequences that make a key look like a credential when the key
// ends with them: "password", "db_password", "githubToken", "X-Api-Key", "aws_secret_access_key".
// Words that merely contain a term ("max_tokens", "token_count", "secretary") are not credentials.
var credentialTerms = [][]string{
	{"password"}, {"passwd"}, {"pwd"}, {"passphrase"}, {"secret"}, {"token"}, {"apikey"}, {"api", "key"},
	{"accesskey"}, {"access", "key"}, {"authorization"}, {"privatekey"}, {"private", "key"},
	{"clientsecret"}, {"credential"}, {"credentials"}, {"sessionkey"}, {"session", "key"}, {"bearer"},
	{"secretkey"}, {"secret", "key"}, {"signingkey"}, {"signing", "key"}, {"accesstoken"}, {"authtoken"},
	{"cookie"}, {"sshkey"}, {"ssh", "key"}, {"basic", "auth"}, {"http", "auth"}, {"proxy", "auth"},
}

// paginationTokens are "<word> token" keys that name paging state, not a credential.
var paginationTokens = map[string]bool{"page": true, "next": true, "continuation": true, "pagination": true, "sync": true}

// credentialKey reports whether a payload key names a credential (case-insensitive; words
// split at '-', '_', '.', spaces and camelCase boundaries).
func credentialKey(key string) bool {
	words := keyWords(key)
	if n := len(words); n >= 2 && words[n-1] == "token" && paginationTokens[words[n-2]] {
		return false
	}
	if len(words) == 1 && words[0] == "auth" { // an "auth" member holds one; "require_auth" is a flag
		return true
	}
	for _, term := range credentialTerms {
		if len(words) >= len(term) && equalWords(words[len(words)-len(term):], term) {
			return true
		}
	}
	return false
}

func keyWords(key string) []string {
	var words []string
	var cur []rune
	flush := func() {
		if len(cur) > 0 {
			words = append(words, strings.ToLower(string(cur)))
			cur = cur[:0]
		}
	}
	runes := []rune(key)
	for i, r := range runes {
		switch {
		case !unicode.IsLetter(r) && !unicode.IsDigit(r):
			flush()
			continue
		case unicode.IsUpper(r) && i > 0 && (unicode.IsLower(runes[i-1]) ||
			(i+1 < len(runes) && unicode.IsLower(runes[i+1]) && unicode.IsUpper(runes[i-1]))):
			flush() // "apiKey" → api key; "APIKey" → api key
		}
		cur = append(cur, r)
	}
	flush()
	return words
}

func equalWords(a, b []string) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// looksLikeToken reports whether s contains a common token pattern.
func looksLikeToken(s string) bool { return secretlike.Token(s) }

// sendTargets are the validated mention and request IDs of a send.
type sendTargets struct {
	mentions []uuid.UUID
	requests []uuid.UUID
}

// checkTargetArrays applies the rules that need nothing but the arrays and the caller:
// at most targets_max each, distinct, never the caller.
func checkTargetArrays(mentions, requests *[]uuid.UUID, self uuid.UUID, s api.SettingsValues) (sendTargets, error) {
	var t sendTargets
	for _, arr := range []struct {
		field string
		ids   *[]uuid.UUID
		out   *[]uuid.UUID
	}{{"mention_agent_ids", mentions, &t.mentions}, {"request_agent_ids", requests, &t.requests}} {
		*arr.out = []uuid.UUID{}
		if arr.ids == nil {
			continue
		}
		if int64(len(*arr.ids)) > s.TargetsMax {
			return t, apierr.TooLarge(arr.field, "too_many_targets", s.TargetsMax)
		}
		seen := make(map[uuid.UUID]bool, len(*arr.ids))
		for i, id := range *arr.ids {
			switch {
			case seen[id]:
				return t, apierr.Invalid(fieldIndex(arr.field, i), "each agent may be named once").WithReason("duplicate_target")
			case id == self:
				return t, apierr.Invalid(fieldIndex(arr.field, i), "the sender cannot target itself").WithReason("self_target")
			}
			seen[id] = true
		}
		*arr.out = *arr.ids
	}
	return t, nil
}

// envelopeSize is the byte size of a send's whole envelope as compact JSON: body, payload,
// targets and file metadata.
func envelopeSize(c sendContent, t sendTargets, recipients []uuid.UUID) int {
	env := struct {
		Body       string          `json:"body_md"`
		Payload    json.RawMessage `json:"payload,omitempty"`
		Mentions   []uuid.UUID     `json:"mention_agent_ids"`
		Requests   []uuid.UUID     `json:"request_agent_ids"`
		Recipients []uuid.UUID     `json:"recipient_agent_ids,omitempty"`
		Files      []api.FileRef   `json:"files"`
		Attachment *attachmentMeta `json:"attachment,omitempty"`
	}{c.body, c.payload, t.mentions, t.requests, recipients, c.files, attachmentIdentity(c.upload)}
	b, _ := compactJSON(env)
	return len(b)
}

func checkEnvelope(c sendContent, t sendTargets, recipients []uuid.UUID, s api.SettingsValues) error {
	if int64(envelopeSize(c, t, recipients)) > s.EnvelopeMaxBytes {
		return apierr.TooLarge("", "envelope_too_large", s.EnvelopeMaxBytes)
	}
	return nil
}

// contentHash is the consecutive-duplicate key: SHA-256 over the length-prefixed body,
// payload bytes (absent and {} differ), file references and attachment metadata.
func contentHash(body string, payload, files, attachment []byte) []byte {
	h := sha256.New()
	part := func(present bool, b []byte) {
		var n [9]byte
		if present {
			n[0] = 1
		}
		binary.BigEndian.PutUint64(n[1:], uint64(len(b)))
		h.Write(n[:])
		h.Write(b)
	}
	part(true, []byte(body))
	part(payload != nil, payload)
	part(true, files)
	part(attachment != nil, attachment)
	return h.Sum(nil)
}

// compactJSON marshals without HTML escaping (stored and measured bytes are the plain form).
func compactJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
