package schema

import (
	"errors"
	"strings"
	"testing"
)

const testSchema = `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "additionalProperties": false,
  "required": ["box_key", "patch"],
  "properties": {
    "box_key": {"type": "string", "pattern": "^[a-z0-9][a-z0-9-]{1,62}$"},
    "count": {"type": "integer", "minimum": 1},
    "agent_id": {"type": "string", "format": "uuid"},
    "at": {"type": "string", "format": "date-time"},
    "email": {"type": "string", "format": "email"},
    "inbox_seqs": {"type": "array", "maxItems": 5, "items": {"type": "string", "pattern": "^[0-9]{1,19}$"}},
    "patch": {
      "type": "object",
      "additionalProperties": false,
      "minProperties": 1,
      "properties": {
        "role": {"type": "string", "maxLength": 10},
        "description": {"type": "string"}
      }
    },
    "destination": {
      "oneOf": [
        {"type": "object", "additionalProperties": false, "required": ["room_id"], "properties": {"room_id": {"type": "string", "format": "uuid"}}},
        {"type": "object", "additionalProperties": false, "required": ["agent_id"], "properties": {"agent_id": {"type": "string", "format": "uuid"}}}
      ]
    },
    "mode": {"oneOf": [{"type": "string", "pattern": "^a+$"}, {"type": "string", "pattern": "^b+$"}]},
    "filter": {"type": "string", "enum": ["unread", "all", "acked"]}
  }
}`

const marker = "MARKER-12345"

func check(t *testing.T, doc string, wantField, wantKeyword string) *Violation {
	t.Helper()
	v := MustCompile("test", []byte(testSchema))
	viol := v.ValidateJSON([]byte(doc))
	if viol == nil {
		t.Fatalf("%s: valid, want %s/%s", doc, wantField, wantKeyword)
	}
	if viol.Field != wantField || viol.Keyword != wantKeyword {
		t.Fatalf("%s: got field=%q keyword=%q (%s), want %q/%q", doc, viol.Field, viol.Keyword, viol.Message, wantField, wantKeyword)
	}
	for _, s := range []string{viol.Message, viol.Error(), viol.Field} {
		if strings.Contains(s, marker) || strings.Contains(s, "12345") {
			t.Fatalf("%s: violation echoes the value: %q", doc, s)
		}
	}
	return viol
}

func TestValid(t *testing.T) {
	v := MustCompile("test", []byte(testSchema))
	ok := `{"box_key":"team-a","patch":{"role":"x"},"count":3,"agent_id":"0b6c3c1e-9a4b-4f7e-8d2a-1c2b3d4e5f60",
	  "at":"2024-01-02T03:04:05Z","email":"not-an-email","inbox_seqs":["1","2"],"destination":{"room_id":"0b6c3c1e-9a4b-4f7e-8d2a-1c2b3d4e5f60"},
	  "mode":"aaa","filter":"all"}`
	if viol := v.ValidateJSON([]byte(ok)); viol != nil {
		t.Fatalf("valid instance rejected: %+v", viol)
	}
}

func TestViolations(t *testing.T) {
	base := `"box_key":"team-a","patch":{"role":"x"}`
	check(t, `{`+base+`,"bogus":1}`, "bogus", "additionalProperties")
	check(t, `{`+base+`,"zeta":1,"bogus":2}`, "bogus", "additionalProperties")
	check(t, `{"box_key":"team-a","patch":{"bogus":"`+marker+`"}}`, "patch.bogus", "additionalProperties")
	// An unknown key that does not read as a name is the caller's text: the field is the
	// object holding it (check fails on any echo of the marker).
	check(t, `{`+base+`,"<b>`+marker+`</b>":1}`, "", "additionalProperties")
	check(t, `{"box_key":"team-a","patch":{"a `+marker+`":1}}`, "patch", "additionalProperties")
	check(t, `{"box_key":"team-a","patch":{"`+strings.Repeat("a", 65)+`":1}}`, "patch", "additionalProperties")
	check(t, `{`+base+`,"destination":{"room_id":"0b6c3c1e-9a4b-4f7e-8d2a-1c2b3d4e5f60","`+marker+`\n":1}}`, "destination", "additionalProperties")
	check(t, `{"box_key":"team-a"}`, "patch", "required")
	if v := check(t, `{"box_key":"team-a","patch":{}}`, "patch", "minProperties"); v.Message != "needs at least one field to change" {
		t.Fatalf("minProperties message %q", v.Message)
	}
	v := check(t, `{"box_key":"`+marker+`","patch":{"role":"x"}}`, "box_key", "pattern")
	if v.Message != "does not match the required pattern" {
		t.Fatalf("pattern message %q", v.Message)
	}
	v = check(t, `{"box_key":["`+marker+`"],"patch":{"role":"x"}}`, "box_key", "type")
	if !strings.HasPrefix(v.Message, "wrong type") {
		t.Fatalf("type message %q", v.Message)
	}
	check(t, `{`+base+`,"count":"`+marker+`"}`, "count", "type")
	check(t, `{`+base+`,"count":0}`, "count", "minimum")
	check(t, `{`+base+`,"inbox_seqs":["1","2","3","`+marker+`"]}`, "inbox_seqs[3]", "pattern")
	check(t, `{`+base+`,"inbox_seqs":["1","2","3",12345]}`, "inbox_seqs[3]", "type")
	check(t, `{`+base+`,"inbox_seqs":["1","2","3","4","5","6"]}`, "inbox_seqs", "maxItems")
	check(t, `{"box_key":"team-a","patch":{"role":"`+marker+`-long"}}`, "patch.role", "maxLength")
	check(t, `{`+base+`,"agent_id":"`+marker+`"}`, "agent_id", "format")
	check(t, `{`+base+`,"at":"`+marker+`"}`, "at", "format")
	v = check(t, `{`+base+`,"filter":"`+marker+`"}`, "filter", "enum")
	if v.Message != "is not one of the allowed values: unread, all, acked" { // the schema's values, never the rejected one
		t.Fatalf("enum message %q", v.Message)
	}
	check(t, `{`+base+`,"destination":{"room_id":"`+marker+`"}}`, "destination.room_id", "format")
	check(t, `{`+base+`,"mode":"`+marker+`"}`, "mode", "oneOf")
	check(t, `["`+marker+`"]`, "", "type")
}

func TestValidateGoValues(t *testing.T) {
	v := MustCompile("test", []byte(testSchema))
	inst, err := DecodeStrict([]byte(`{"box_key":"team-a","patch":{"role":"x"},"count":2}`))
	if err != nil {
		t.Fatal(err)
	}
	if viol := v.Validate(inst); viol != nil {
		t.Fatalf("unexpected %+v", viol)
	}
}

func TestDecodeStrict(t *testing.T) {
	good := []string{
		`{"a":"\ud83d\ude00"}`,
		`{"a":"\\ud800"}`,
		`"\u00e9\u0041"`,
		`  {"n": 12345678901234567890} `,
		`[1,2,3]`,
	}
	for _, g := range good {
		if _, err := DecodeStrict([]byte(g)); err != nil {
			t.Errorf("%s: %v", g, err)
		}
	}
	bad := []struct {
		in   string
		want error
	}{
		{`"\ud800"`, ErrLoneSurrogate},
		{`{"x":"` + marker + `\ud800` + marker + `"}`, ErrLoneSurrogate},
		{`"\ud800\u0041"`, ErrLoneSurrogate},
		{`"\udc00"`, ErrLoneSurrogate},
		{`"\uDFFF` + marker + `"`, ErrLoneSurrogate},
		{"\"" + marker + "\xff\xfe\"", ErrInvalidUTF8},
		{"{\"a\":\"\xc3\"}", ErrInvalidUTF8},
		{`{} {}`, ErrTrailingData},
		{`{"a":1}` + marker, ErrTrailingData},
		{`{"a":` + marker + `}`, ErrMalformedJSON},
		{``, ErrEmptyJSON},
	}
	for _, b := range bad {
		_, err := DecodeStrict([]byte(b.in))
		if !errors.Is(err, b.want) {
			t.Errorf("%q: got %v, want %v", b.in, err, b.want)
			continue
		}
		if strings.Contains(err.Error(), marker) || strings.Contains(DecodeMessage(err), marker) {
			t.Errorf("%q: error echoes the input: %v", b.in, err)
		}
	}
	// A member named twice is refused, naming the member when its name reads as a name and
	// the object that holds it otherwise (never the caller's text).
	for _, c := range []struct{ in, field string }{
		{`{"a":1,"a":1}`, "a"},
		{`{"o":{"b":1,"c":2,"b":3}}`, "o.b"},
		{`{"o":[{"x":1},{"x":1,"\u0078":2}]}`, "o[1].x"},
		{`{"o":{"` + marker + ` y":1,"` + marker + ` y":2}}`, "o"},
		{`{"` + marker + `!":1,"` + marker + `!":2}`, ""},
	} {
		_, err := DecodeStrict([]byte(c.in))
		f, ok := DuplicateKeyField(err)
		if !ok || f != c.field {
			t.Errorf("%s: %v (field %q), want a duplicate key at %q", c.in, err, f, c.field)
			continue
		}
		if strings.Contains(err.Error(), marker) || strings.Contains(DecodeMessage(err), marker) {
			t.Errorf("%q: error echoes the input: %v", c.in, err)
		}
	}
	// Text refused below a key that does not read as a name (markup, a token) is named by the
	// object that holds the key: the key is the caller's text too.
	for _, c := range []struct{ in, field string }{
		{`{"o":{"ok":{"y":"\u0000"}}}`, "o.ok.y"},
		{`{"o":{"<b> ` + marker + `":{"y":"\u0000"}}}`, "o"},
		{`{"o":[{"ghp_` + strings.Repeat("A", 20) + `":"\ud800"}]}`, "o[0]"},
	} {
		_, err := DecodeStrict([]byte(c.in))
		if f, ok := TextField(err); !ok || f != c.field {
			t.Errorf("%s: %v (field %q), want invalid text at %q", c.in, err, f, c.field)
		}
	}
	v := MustCompile("test", []byte(testSchema))
	viol := v.ValidateJSON([]byte(`{"box_key":"\ud800"}`))
	if viol == nil || viol.Keyword != "json" {
		t.Fatalf("ValidateJSON lone surrogate: %+v", viol)
	}
}

func TestOneOfRootUnknownField(t *testing.T) {
	doc := `{"type":"object","oneOf":[
	  {"type":"object","additionalProperties":false,"required":["box_key","a"],"properties":{"box_key":{"type":"string"},"a":{"type":"string"}}},
	  {"type":"object","additionalProperties":false,"required":["box_key","b"],"properties":{"box_key":{"type":"string"},"b":{"type":"string"}}}]}`
	v := MustCompile("branched", []byte(doc))
	if viol := v.ValidateJSON([]byte(`{"box_key":"k","a":"x"}`)); viol != nil {
		t.Fatalf("valid rejected: %+v", viol)
	}
	viol := v.ValidateJSON([]byte(`{"box_key":"k","a":"x","bogus":1}`))
	if viol == nil || viol.Field != "bogus" || viol.Keyword != "additionalProperties" {
		t.Fatalf("got %+v", viol)
	}
	viol = v.ValidateJSON([]byte(`{"box_key":"k","a":5}`))
	if viol == nil || viol.Field != "a" || viol.Keyword != "type" {
		t.Fatalf("got %+v", viol)
	}
	viol = v.ValidateJSON([]byte(`{"box_key":"k"}`))
	if viol == nil || viol.Field != "" || viol.Keyword != "oneOf" {
		t.Fatalf("got %+v", viol)
	}
}
