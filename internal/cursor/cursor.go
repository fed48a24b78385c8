// Package cursor encodes pagination cursors (SPEC §9): base64url strict JSON carrying a
// position, bound by an HMAC to its scope — the authenticated agent, the stream, its
// filter and the applicable room epoch. Any mismatch or tampering fails to decode.
// Cursors are neither credentials nor ACK tokens.
package cursor

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
)

// ErrInvalid is returned for any cursor that does not decode for the given scope.
var ErrInvalid = errors.New("cursor: invalid")

// Scope is what a cursor is valid for. Every field takes part in the MAC.
type Scope struct {
	Agent  string // authenticated agent ID
	Stream string // e.g. "conversation", "inbox", "directory"
	Filter string // canonical form of the stream's filter (room ID, DM peer, query, ...)
	Epoch  int64  // room membership epoch, 0 when not applicable
}

func (s Scope) bytes() []byte {
	b, _ := json.Marshal([]any{s.Agent, s.Stream, s.Filter, s.Epoch})
	return b
}

// Codec signs and checks cursors with one key shared by every server process.
type Codec struct{ key []byte }

// New returns a codec for key (at least 32 random bytes).
func New(key []byte) *Codec { return &Codec{key: append([]byte(nil), key...)} }

type envelope struct {
	V int             `json:"v"`
	P json.RawMessage `json:"p"`
}

// Encode returns the cursor for position pos (any JSON-encodable struct) in scope.
func (c *Codec) Encode(scope Scope, pos any) (string, error) {
	p, err := json.Marshal(pos)
	if err != nil {
		return "", err
	}
	body, err := json.Marshal(envelope{V: 1, P: p})
	if err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(body) + "." + base64.RawURLEncoding.EncodeToString(c.mac(scope, body)), nil
}

// Decode checks the cursor against scope and decodes its position into pos, strictly
// (unknown fields are invalid).
func (c *Codec) Decode(scope Scope, token string, pos any) error {
	bodyPart, macPart, ok := strings.Cut(token, ".")
	if !ok {
		return ErrInvalid
	}
	body, err := base64.RawURLEncoding.Strict().DecodeString(bodyPart)
	if err != nil {
		return ErrInvalid
	}
	mac, err := base64.RawURLEncoding.Strict().DecodeString(macPart)
	if err != nil || !hmac.Equal(mac, c.mac(scope, body)) {
		return ErrInvalid
	}
	var env envelope
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&env); err != nil || env.V != 1 {
		return ErrInvalid
	}
	dec = json.NewDecoder(bytes.NewReader(env.P))
	dec.DisallowUnknownFields()
	if err := dec.Decode(pos); err != nil {
		return ErrInvalid
	}
	return nil
}

func (c *Codec) mac(scope Scope, body []byte) []byte {
	h := hmac.New(sha256.New, c.key)
	h.Write(scope.bytes())
	h.Write([]byte{0})
	h.Write(body)
	return h.Sum(nil)[:16]
}
