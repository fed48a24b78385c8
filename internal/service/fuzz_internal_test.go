package service

import (
	"bytes"
	"encoding/json"
	"net/url"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/gen/api"
)

// FuzzFileURL: the file URL rule never panics, and what it admits is an https URL without
// query, fragment, userinfo or a token pattern.
func FuzzFileURL(f *testing.F) {
	for _, s := range []string{"https://example.com/a", "http://example.com", "https://user@example.com/", "https://127.0.0.1/",
		"https://[::1]/", "https://example.com/?q=1", "https://0x7f000001/", "https://example.com/abk_aaaaaaaaaaaaaaaaaaaaaaaa",
		"https://ｌｏｃａｌｈｏｓｔ/", "https://example.com/eyJhbGciOi.eyJzdWIiOi.c2lnbmF0dXJl"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		if !fileURLAllowed(raw) {
			return
		}
		authority, _, _ := strings.Cut(raw[len("https://"):], "/")
		// "@" is userinfo only in the authority ("https://host/@name" is a path).
		unescaped, _ := url.PathUnescape(raw)
		if !strings.HasPrefix(strings.ToLower(raw), "https://") || strings.ContainsAny(raw, "?#") || strings.Contains(authority, "@") ||
			looksLikeToken(raw) || looksLikeToken(unescaped) {
			t.Fatalf("admitted %q", raw)
		}
	})
}

// FuzzPayload: the payload rules never panic, and an admitted payload is a JSON object within
// the byte and depth caps that carries no token pattern.
func FuzzPayload(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":{"b":[1,2,3]}}`, `{"password":"x"}`, `{"note":"ghp_aaaaaaaaaaaaaaaaaaaaaaaa"}`,
		`[1]`, `{"a":` + strings.Repeat("[", 20) + strings.Repeat("]", 20) + `}`, `{"k":"abk_QQQQQQQQQQQQQQQQQQQQQQQQ"}`,
		`{"k":"\u00e9\u003c\/\"\\\n\u0001\ud83d\ude00"}`} {
		f.Add([]byte(s))
	}
	settings := api.SettingsValues{PayloadMaxBytes: 8192, PayloadMaxDepth: 8}
	f.Fuzz(func(t *testing.T, raw []byte) {
		out, err := validatePayload(raw, settings)
		if err != nil {
			return
		}
		var v map[string]any
		if json.Unmarshal(out, &v) != nil {
			t.Fatalf("admitted a non-object %q", out)
		}
		// The form kept is a fixed point: admitting it again changes nothing.
		if again, err := validatePayload(out, settings); err != nil || !bytes.Equal(again, out) {
			t.Fatalf("%q is kept as %q when sent again (err %v)", out, again, err)
		}
		depth, beyond := scanJSON(out)
		if int64(len(out)) > settings.PayloadMaxBytes || depth > settings.PayloadMaxDepth || beyond || looksLikeToken(string(out)) {
			t.Fatalf("admitted %q beyond the rules", out)
		}
	})
}

// The payload cap and the duplicate key measure the value, not the sender's escaping (a
// probe found 8,008 bytes of "é" admitted raw and refused as \u00e9, and the two not
// duplicates of each other): every spelling of one value is kept as the same bytes.
func TestPayloadKeptInOneFormWhateverTheEscaping(t *testing.T) {
	settings := api.SettingsValues{PayloadMaxBytes: 8192, PayloadMaxDepth: 8}
	value := strings.Repeat("é", 4000) // 8,000 bytes of UTF-8; 24,000 as \u00e9 escapes
	raw := `{"k":"` + value + `","t":"a<b>&c / \"q\" \\ tab\t"}`
	spellings := []string{
		`{"k":"` + strings.Repeat(`\u00e9`, 4000) + `","t":"a\u003cb\u003e\u0026c \/ \"q\" \\ tab\t"}`, // Python's json.dumps, escaped slash
		`{"k":"` + strings.Repeat(`\u00E9`, 4000) + `","t":"a<b>&c / \u0022q\u0022 \u005c tab\u0009"}`,
		"{ \"k\" : \"" + value + "\",\n \"t\":\"a<b>&c / \\\"q\\\" \\\\ tab\\t\" }",
	}
	want, err := validatePayload(json.RawMessage(raw), settings)
	if err != nil {
		t.Fatalf("raw spelling refused: %v", err)
	}
	if !json.Valid(want) || len(want) > 8192 {
		t.Fatalf("kept %d bytes", len(want))
	}
	for i, s := range spellings {
		got, err := validatePayload(json.RawMessage(s), settings)
		if err != nil {
			t.Fatalf("spelling %d refused: %v", i, err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("spelling %d kept as %.80q…, want %.80q…", i, got, want)
		}
		if h1, h2 := contentHash("b", got, nil, nil), contentHash("b", want, nil, nil); !bytes.Equal(h1, h2) {
			t.Fatalf("spelling %d has another duplicate key", i)
		}
	}
	// The cap still counts bytes of the value: one more é is over it however it is spelled.
	over := `{"k":"` + strings.Repeat(`\u00e9`, 4095) + `"}`
	if _, err := validatePayload(json.RawMessage(over), settings); err == nil {
		t.Fatal("a payload over the cap was admitted")
	}
}
