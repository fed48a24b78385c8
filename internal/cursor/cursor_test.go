package cursor

import (
	"encoding/base64"
	"strings"
	"testing"
)

type pos struct {
	After int64 `json:"after"`
	Upper int64 `json:"upper"`
}

func TestRoundTripAndScopeBinding(t *testing.T) {
	c := New([]byte("0123456789abcdef0123456789abcdef"))
	scope := Scope{Agent: "a1", Stream: "conversation", Filter: "room:r1", Epoch: 2}
	tok, err := c.Encode(scope, pos{After: 5, Upper: 9})
	if err != nil {
		t.Fatal(err)
	}
	var got pos
	if err := c.Decode(scope, tok, &got); err != nil || got != (pos{5, 9}) {
		t.Fatalf("round trip: %v %v", got, err)
	}
	for name, other := range map[string]Scope{
		"other agent":  {Agent: "a2", Stream: "conversation", Filter: "room:r1", Epoch: 2},
		"other stream": {Agent: "a1", Stream: "inbox", Filter: "room:r1", Epoch: 2},
		"other filter": {Agent: "a1", Stream: "conversation", Filter: "room:r2", Epoch: 2},
		"other epoch":  {Agent: "a1", Stream: "conversation", Filter: "room:r1", Epoch: 3},
	} {
		if err := c.Decode(other, tok, &got); err != ErrInvalid {
			t.Errorf("%s: accepted", name)
		}
	}
	if err := New([]byte("another key another key another k")).Decode(scope, tok, &got); err != ErrInvalid {
		t.Error("other key accepted")
	}
	// Tampering with the body, however small, is rejected.
	body, mac, _ := strings.Cut(tok, ".")
	raw, _ := base64.RawURLEncoding.DecodeString(body)
	tampered := strings.Replace(string(raw), `"after":5`, `"after":1`, 1)
	if err := c.Decode(scope, base64.RawURLEncoding.EncodeToString([]byte(tampered))+"."+mac, &got); err != ErrInvalid {
		t.Error("tampered cursor accepted")
	}
	for _, junk := range []string{"", ".", "abc", "abc.def", tok + "x", "x" + tok} {
		if err := c.Decode(scope, junk, &got); err != ErrInvalid {
			t.Errorf("junk %q accepted", junk)
		}
	}
}

func TestUnknownPositionFieldsRejected(t *testing.T) {
	c := New([]byte("0123456789abcdef0123456789abcdef"))
	scope := Scope{Agent: "a"}
	tok, _ := c.Encode(scope, map[string]int{"after": 1, "extra": 2})
	var got pos
	if err := c.Decode(scope, tok, &got); err != ErrInvalid {
		t.Fatal("unknown field accepted")
	}
}
