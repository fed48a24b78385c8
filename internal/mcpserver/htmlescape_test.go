package mcpserver

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
	"unicode/utf8"
)

func TestUnescapeHTML(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`"\u003ca\u003e \u0026"`, `"<a> &"`},
		{`"\u003C\u003E"`, `"<>"`},
		{`"\\u003c"`, `"\\u003c"`},                   // an escaped backslash, then the letters u003c
		{`"\\\u003c"`, `"\\<"`},                      // an escaped backslash, then an escaped <
		{`"\u2028\u0027\n\""`, `"\u2028\u0027\n\""`}, // other escapes stay
		{`{"a":["\u0026",1]}`, `{"a":["&",1]}`},
	} {
		out, held := UnescapeHTML(nil, []byte(c.in), true)
		if string(out) != c.want || held != nil {
			t.Errorf("UnescapeHTML(%s) = %s (held %q), want %s", c.in, out, held, c.want)
		}
	}
}

// Any JSON text, cut into pieces anywhere, comes out as the same JSON value with no HTML
// escape left.
func FuzzUnescapeHTML(f *testing.F) {
	f.Add(`<a href="x&y">\u003c</a>`, 3)
	f.Add(`\\\\<<>>&&\"`, 1)
	f.Fuzz(func(t *testing.T, s string, cut int) {
		src, err := json.Marshal(map[string]any{"s": s, "list": []string{s, "<&>"}})
		if err != nil {
			t.Skip()
		}
		if cut < 0 {
			cut = -cut
		}
		cut %= len(src) + 1
		out, held := UnescapeHTML(nil, src[:cut], false)
		out, held = UnescapeHTML(out, append(held, src[cut:]...), true)
		if held != nil {
			t.Fatalf("held %q at the end", held)
		}
		var want, got any
		json.Unmarshal(src, &want) //nolint:errcheck // json.Marshal wrote it
		if err := json.Unmarshal(out, &got); err != nil || !reflect.DeepEqual(want, got) {
			t.Fatalf("%s became %s (%v)", src, out, err)
		}
		if !utf8.ValidString(s) {
			return // json.Marshal wrote \ufffd escapes for the invalid bytes
		}
		compact := bytes.NewBuffer(nil)
		enc := json.NewEncoder(compact)
		enc.SetEscapeHTML(false)
		enc.Encode(want) //nolint:errcheck
		if !bytes.Equal(bytes.TrimSuffix(compact.Bytes(), []byte("\n")), out) {
			t.Fatalf("%s became %s, want %s", src, out, compact.Bytes())
		}
	})
}
