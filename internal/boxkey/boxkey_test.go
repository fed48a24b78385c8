package boxkey_test

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/boxkey"
	"github.com/agentbox/agentbox/spec"
)

// TestValidIsTheContractPattern: Valid agrees with the BoxKey pattern of spec/openapi.json.
func TestValidIsTheContractPattern(t *testing.T) {
	var doc struct {
		Components struct {
			Schemas map[string]struct {
				Pattern string `json:"pattern"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(spec.OpenAPI, &doc); err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(doc.Components.Schemas["BoxKey"].Pattern)
	cases := []string{"", "a", "ab", "demo", "a-", "-a", "0a", "Ab", "a_b", "a b", "a.b", "bad!", "a\x00b", "é1",
		strings.Repeat("a", 62), strings.Repeat("a", 63), strings.Repeat("a", 64), "a" + strings.Repeat("-", 62)}
	for _, s := range cases {
		if got, want := boxkey.Valid(s), re.MatchString(s); got != want {
			t.Errorf("Valid(%q) = %v, the contract's pattern says %v", s, got, want)
		}
	}
}
