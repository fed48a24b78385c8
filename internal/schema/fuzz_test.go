package schema

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzDecodeStrict: the strict decoder never panics; what it accepts is valid JSON that
// encoding/json decodes to the same value, holding no string PostgreSQL cannot store.
func FuzzDecodeStrict(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":[1,2,{"b":"c"}]}`, `"\ud83d\ude00"`, `"\ud800"`, `"\u0000"`, "\"\xff\"",
		`{"a":1e400}`, `[-0.5e-3,true,false,null]`, `{"a":"x","a":"y"}`, `  {"k" : "v"}  x`, `{"x":"\\u0000"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := DecodeStrict(data)
		if err != nil {
			return
		}
		if !json.Valid(data) {
			t.Fatalf("accepted invalid JSON %q", data)
		}
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		var want any
		if err := dec.Decode(&want); err != nil {
			t.Fatalf("encoding/json refuses what was accepted: %v", err)
		}
		if !reflect.DeepEqual(v, want) {
			t.Fatalf("decoded %#v, encoding/json %#v", v, want)
		}
		walkStrings(v, func(s string) {
			if !utf8.ValidString(s) || strings.ContainsRune(s, 0) || strings.ContainsRune(s, utf8.RuneError) && !bytes.Contains(data, []byte("\uFFFD")) && !bytes.Contains(bytes.ToLower(data), []byte(`\ufffd`)) {
				t.Fatalf("accepted unstorable or replaced text %q", s)
			}
		})
	})
}

func walkStrings(v any, fn func(string)) {
	switch x := v.(type) {
	case string:
		fn(x)
	case []any:
		for _, e := range x {
			walkStrings(e, fn)
		}
	case map[string]any:
		for k, e := range x {
			fn(k)
			walkStrings(e, fn)
		}
	}
}

// FuzzCheckText: the text rule for path, query, header and form values is exactly
// "valid UTF-8 without U+0000".
func FuzzCheckText(f *testing.F) {
	for _, s := range []string{"", "plain", "a\x00b", "\xff", "\xed\xa0\x80", "héllo", "\U0001F600"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		err := CheckText("f", s)
		want := utf8.ValidString(s) && !strings.ContainsRune(s, 0)
		if (err == nil) != want {
			t.Fatalf("CheckText(%q) = %v, want ok=%v", s, err, want)
		}
		if err != nil && strings.Contains(err.Error(), s) && s != "" {
			t.Fatalf("the error echoes the value: %v", err)
		}
	})
}
