package schema

import (
	"fmt"
	"strings"
	"testing"
)

// fastTestSchema uses every keyword the fast path implements, the way the output schemas do.
const fastTestSchema = `{
  "type": "object", "additionalProperties": false, "required": ["items", "status"],
  "properties": {
    "status": {"type": "string", "enum": ["sent", "duplicate"]},
    "note": {"type": ["string", "null"], "maxLength": 5},
    "count": {"type": "integer", "minimum": 1, "maximum": 100},
    "name": {"type": "string", "minLength": 2},
    "list": {"type": "array", "minItems": 1, "items": {"type": "string"}},
    "opts": {"type": "object", "minProperties": 1, "additionalProperties": false,
             "properties": {"a": {"type": "boolean"}, "b": {"type": "boolean"}}},
    "items": {"type": "array", "maxItems": 3, "items": {
      "type": "object", "additionalProperties": false, "required": ["id", "seq", "at", "reasons"],
      "properties": {
        "id": {"type": "string", "format": "uuid"},
        "seq": {"type": "string", "pattern": "^[0-9]{1,19}$"},
        "at": {"type": "string", "format": "date-time"},
        "reasons": {"type": "integer"},
        "score": {"type": "number"},
        "done": {"type": "boolean"},
        "kind": {"type": ["string", "null"], "enum": ["a", "b", null]},
        "payload": {"description": "any JSON value"},
        "meta": {"type": "object", "additionalProperties": {"type": "string"}},
        "tags": {"type": "object", "additionalProperties": true}
      }}}
  }
}`

const fastValidItem = `{"id":"0192f0c4-7a9e-7c3d-8f00-0123456789ab","seq":"42","at":"2026-12-02T06:00:00.123456Z","reasons":3}`

var fastValidDocs = []string{
	`{"status":"sent","items":[]}`,
	`{"status":"sent","items":[],"count":1,"name":"ab","list":["x"],"opts":{"a":true}}`,
	`{"status":"sent","items":[],"count":100,"name":"\u00e9\u00e9","list":["x","y"],"opts":{"a":true,"b":false}}`,
	`{"status":"duplicate","note":null,"items":[` + fastValidItem + `]}`,
	` { "status" : "sent" , "note" : "a\né" , "items" : [ ` + fastValidItem + ` ] } `,
	`{"status":"sent","items":[{"id":"0192F0C4-7A9E-7C3D-8F00-0123456789AB","seq":"1","at":"2026-12-02T06:00:00+01:00","reasons":-7,` +
		`"score":1.5e3,"done":false,"kind":null,"payload":{"x":[1,"\ud83d\ude00",{"y":null}]},"meta":{"k":"v"},"tags":{"t":1}}]}`,
	`{"status":"sent","items":[{"id":"0192f0c4-7a9e-7c3d-8f00-0123456789ab","seq":"9","at":"2026-12-02T06:00:00Z","reasons":0,"kind":"b","\u0073core":2}]}`,
}

var fastInvalidDocs = []string{
	``, `null`, `[]`, `{"items":[]}`, `{"status":"sent"}`, `{"status":"lost","items":[]}`, `{"status":"sent","items":[],"x":1}`,
	`{"status":"sent","note":"abcdef","items":[]}`, `{"status":"sent","note":7,"items":[]}`,
	`{"status":"sent","items":[` + fastValidItem + `,` + fastValidItem + `,` + fastValidItem + `,` + fastValidItem + `]}`,
	`{"status":"sent","items":[{"id":"not-a-uuid","seq":"1","at":"2026-12-02T06:00:00Z","reasons":1}]}`,
	`{"status":"sent","items":[{"id":"0192f0c4-7a9e-7c3d-8f00-0123456789ab","seq":"x1","at":"2026-12-02T06:00:00Z","reasons":1}]}`,
	`{"status":"sent","items":[{"id":"0192f0c4-7a9e-7c3d-8f00-0123456789ab","seq":"1","at":"yesterday","reasons":1}]}`,
	`{"status":"sent","items":[{"id":"0192f0c4-7a9e-7c3d-8f00-0123456789ab","seq":"1","at":"2026-12-02T06:00:00Z","reasons":1.5}]}`,
	`{"status":"sent","items":[{"id":"0192f0c4-7a9e-7c3d-8f00-0123456789ab","seq":"1","at":"2026-12-02T06:00:00Z"}]}`,
	`{"status":"sent","items":[{"id":"0192f0c4-7a9e-7c3d-8f00-0123456789ab","seq":"1","at":"2026-12-02T06:00:00Z","reasons":1,"kind":"c"}]}`,
	`{"status":"sent","items":[{"id":"0192f0c4-7a9e-7c3d-8f00-0123456789ab","seq":"1","at":"2026-12-02T06:00:00Z","reasons":1,"meta":{"k":1}}]}`,
	`{"status":"sent","items":[],"note":"\u0000"}`, `{"status":"sent","items":[],"note":"\ud800"}`, "{\"status\":\"sent\",\"items\":[],\"note\":\"\xff\"}",
	`{"status":"sent","items":[]} x`, `{"status":"sent","items":[],"count":0}`, `{"status":"sent","items":[],"count":101}`,
	`{"status":"sent","items":[],"count":-5}`, `{"status":"sent","items":[],"count":2.5}`, `{"status":"sent","items":[],"name":"a"}`,
	`{"status":"sent","items":[],"name":"\u00e9"}`, `{"status":"sent","items":[],"list":[]}`, `{"status":"sent","items":[],"opts":{}}`,
	`{"status":"sent","items":[],"opts":{"c":true}}`, `{"status":"sent","items":[],}`, `{"status":"sent" "items":[]}`, `{"status":"sent","items":[01]}`,
	// A member named twice: declared, escaped, in a map, in a value of no schema.
	`{"status":"sent","status":"duplicate","items":[]}`, `{"status":"sent","\u0073tatus":"sent","items":[]}`,
	`{"status":"sent","items":[],"opts":{"a":true,"a":true}}`,
	`{"status":"sent","items":[{"id":"0192f0c4-7a9e-7c3d-8f00-0123456789ab","seq":"1","at":"2026-12-02T06:00:00Z","reasons":1,"tags":{"t":1,"t":1}}]}`,
	`{"status":"sent","items":[{"id":"0192f0c4-7a9e-7c3d-8f00-0123456789ab","seq":"1","at":"2026-12-02T06:00:00Z","reasons":1,"tags":{"t":1,"\u0074":2}}]}`,
	`{"status":"sent","items":[{"id":"0192f0c4-7a9e-7c3d-8f00-0123456789ab","seq":"1","at":"2026-12-02T06:00:00Z","reasons":1,"meta":{"k":"a","k":"b"}}]}`,
	`{"status":"sent","items":[{"id":"0192f0c4-7a9e-7c3d-8f00-0123456789ab","seq":"1","at":"2026-12-02T06:00:00Z","reasons":1,"payload":[{"x":{"y":1,"y":1}}]}]}`,
}

func compileFastTest(t testing.TB) *Validator {
	t.Helper()
	v, err := Compile("fast-test", []byte(fastTestSchema))
	if err != nil {
		t.Fatal(err)
	}
	if v.fast == nil {
		t.Fatal("the test schema has no fast path")
	}
	return v
}

// The fast path accepts valid documents (so it is what runs) and never accepts an invalid
// one; every verdict agrees with the general validator's.
func TestFastPathAgreesWithTheValidator(t *testing.T) {
	v := compileFastTest(t)
	for _, doc := range fastValidDocs {
		if viol := v.validateJSON([]byte(doc)); viol != nil {
			t.Fatalf("the validator rejects test document %s: %v", doc, viol)
		}
		if !v.fast.accepts([]byte(doc)) {
			t.Errorf("the fast path does not accept %s", doc)
		}
		if viol := v.ValidateJSON([]byte(doc)); viol != nil {
			t.Errorf("ValidateJSON(%s) = %v", doc, viol)
		}
	}
	for _, doc := range fastInvalidDocs {
		if v.validateJSON([]byte(doc)) == nil {
			t.Fatalf("the validator accepts test document %q", doc)
		}
		if v.fast.accepts([]byte(doc)) {
			t.Errorf("the fast path accepts %q", doc)
		}
		if v.ValidateJSON([]byte(doc)) == nil {
			t.Errorf("ValidateJSON accepts %q", doc)
		}
	}
}

// An object with more distinct member names of no property schema than the fast path keeps
// (or names it cannot compare without unescaping) is still valid: the general validator
// decides it, and refuses the same object with a name given twice.
func TestManyMemberNamesTakeTheSlowPath(t *testing.T) {
	v := compileFastTest(t)
	var b strings.Builder
	for i := range 40 {
		fmt.Fprintf(&b, `"k%d":%d,`, i, i)
	}
	tags := strings.TrimSuffix(b.String(), ",")
	item := `{"id":"0192f0c4-7a9e-7c3d-8f00-0123456789ab","seq":"1","at":"2026-12-02T06:00:00Z","reasons":1,"tags":{%s}}`
	for _, doc := range []string{fmt.Sprintf(item, tags), fmt.Sprintf(item, `"\u0061":1,"b":2`)} {
		doc = `{"status":"sent","items":[` + doc + `]}`
		if viol := v.ValidateJSON([]byte(doc)); viol != nil {
			t.Errorf("ValidateJSON refuses a valid document: %v", viol)
		}
	}
	doc := `{"status":"sent","items":[` + fmt.Sprintf(item, tags+`,"k7":0`) + `]}`
	if v.fast.accepts([]byte(doc)) || v.ValidateJSON([]byte(doc)) == nil {
		t.Error("a name given twice among many is accepted")
	}
}

// A schema with a keyword the fast path does not implement gets none: only the general
// validator runs, and its verdicts stand.
func TestFastPathOnlyForItsKeywords(t *testing.T) {
	for _, s := range []string{
		`{"type":"object","properties":{"n":{"type":"number","minimum":1.5}}}`,
		`{"type":"integer","exclusiveMinimum":0}`,
		`{"type":"object","maxProperties":2}`,
		`{"oneOf":[{"type":"string"},{"type":"integer"}]}`,
		`{"type":"object","properties":{"a":{"$ref":"#/$defs/a"}},"$defs":{"a":{"type":"string"}}}`,
		`{"enum":[1,2]}`,
		`{"type":"array","uniqueItems":true}`,
	} {
		v, err := Compile("unsupported", []byte(s))
		if err != nil {
			t.Fatal(err)
		}
		if v.fast != nil {
			t.Errorf("schema %s got a fast path", s)
		}
	}
}

// FuzzFastPathNeverAcceptsWhatTheValidatorRejects: whatever the bytes, a document the fast
// path accepts is one the general validator accepts.
func FuzzFastPathNeverAcceptsWhatTheValidatorRejects(f *testing.F) {
	for _, doc := range append(append([]string{}, fastValidDocs...), fastInvalidDocs...) {
		f.Add([]byte(doc))
	}
	v := compileFastTest(f)
	f.Fuzz(func(t *testing.T, doc []byte) {
		if v.fast.accepts(doc) {
			if viol := v.validateJSON(doc); viol != nil {
				t.Fatalf("the fast path accepts %q, which the validator rejects: %v", doc, viol)
			}
		}
	})
}

// BenchmarkValidateJSON compares the fast path with the general validator on a document
// shaped like a 50-item inbox page (run with -bench ValidateJSON -benchmem).
func BenchmarkValidateJSON(b *testing.B) {
	v, err := Compile("bench", []byte(strings.Replace(fastTestSchema, `"maxItems": 3`, `"maxItems": 100`, 1)))
	if err != nil {
		b.Fatal(err)
	}
	items := make([]string, 50)
	for i := range items {
		items[i] = fmt.Sprintf(`{"id":"0192f0c4-7a9e-7c3d-8f00-%012d","seq":"%d","at":"2026-12-02T06:00:00.123456Z","reasons":3,`+
			`"kind":"a","payload":{"body":"%s"},"meta":{"sender":"agent-%d","channel":"room-1"}}`, i, 1000+i, strings.Repeat("x", 200), i)
	}
	doc := []byte(`{"status":"sent","items":[` + strings.Join(items, ",") + `]}`)
	if !v.fast.accepts(doc) || v.validateJSON(doc) != nil {
		b.Fatal("the benchmark document is not valid")
	}
	b.Run("fast", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			v.fast.accepts(doc)
		}
	})
	b.Run("general", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			v.validateJSON(doc)
		}
	})
}

// FuzzFastFormatsAcceptASubset: the fast path's own uuid and date-time checks accept only
// strings the compiled schema's format checks accept.
func FuzzFastFormatsAcceptASubset(f *testing.F) {
	for _, s := range []string{"0192f0c4-7a9e-7c3d-8f00-0123456789ab", "0192F0C4-7A9E-7C3D-8F00-0123456789AB", "0192f0c4-7a9e-7c3d-8f000123456789ab",
		"2026-12-02T06:00:00Z", "2026-12-02t06:00:00.5z", "2024-02-29T23:59:59+23:59", "2023-02-29T00:00:00Z", "2026-12-02T06:00:60Z",
		"2026-12-02T06:00:00,5Z", "0000-01-01T00:00:00-00:00", "2026-13-01T00:00:00Z", "2026-12-02T24:00:00Z"} {
		f.Add(s)
	}
	formats := map[string]func([]byte) bool{"uuid": fastUUID, "date-time": fastDateTime}
	general := map[string]*Validator{}
	for name := range formats {
		v, err := Compile(name, []byte(`{"type":"string","format":"`+name+`"}`))
		if err != nil {
			f.Fatal(err)
		}
		general[name] = v
	}
	f.Fuzz(func(t *testing.T, s string) {
		for name, fast := range formats {
			if fast([]byte(s)) && general[name].Validate(s) != nil {
				t.Fatalf("the fast %s check accepts %q, which the format check rejects", name, s)
			}
		}
	})
}

func TestObjectMembers(t *testing.T) {
	var got []string
	ok := ObjectMembers([]byte(` {"a":1, "b" : {"c":[1,"}"]}, "\u0064":null,"e":"x"} `), func(k, v []byte) bool {
		got = append(got, fmt.Sprintf("%s=%s", k, v))
		return true
	})
	if want := `a=1 b={"c":[1,"}"]} =null e="x"`; !ok || strings.Join(got, " ") != want {
		t.Errorf("ObjectMembers = %v %q, want %q", ok, strings.Join(got, " "), want)
	}
	for _, doc := range []string{``, `[]`, `{"a":1}x`, `{"a":1,}`, `{"a" 1}`, `{"a":"\ud800"}`, "{\"a\":\"\xff\"}", `{"a":1`} {
		if ObjectMembers([]byte(doc), func(k, v []byte) bool { return true }) {
			t.Errorf("ObjectMembers accepts %q", doc)
		}
	}
	if ObjectMembers([]byte(`{"a":1,"b":2}`), func(k, v []byte) bool { return string(k) != "b" }) {
		t.Error("ObjectMembers ignores fn's false")
	}
	if !ObjectMembers([]byte(`{}`), func(k, v []byte) bool { t.Error("a member of {}"); return true }) {
		t.Error("ObjectMembers refuses {}")
	}
}
