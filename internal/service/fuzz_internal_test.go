package service

import (
	"encoding/json"
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
		if !strings.HasPrefix(strings.ToLower(raw), "https://") || strings.ContainsAny(raw, "?#") || strings.Contains(authority, "@") || looksLikeToken(raw) {
			t.Fatalf("admitted %q", raw)
		}
	})
}

// FuzzPayload: the payload rules never panic, and an admitted payload is a JSON object within
// the byte and depth caps that carries no token pattern.
func FuzzPayload(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":{"b":[1,2,3]}}`, `{"password":"x"}`, `{"note":"ghp_aaaaaaaaaaaaaaaaaaaaaaaa"}`,
		`[1]`, `{"a":` + strings.Repeat("[", 20) + strings.Repeat("]", 20) + `}`, `{"k":"abk_QQQQQQQQQQQQQQQQQQQQQQQQ"}`} {
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
		if int64(len(out)) > settings.PayloadMaxBytes || jsonDepth(out) > settings.PayloadMaxDepth || looksLikeToken(string(out)) {
			t.Fatalf("admitted %q beyond the rules", out)
		}
	})
}
