package service_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/gen/api"
	"github.com/getkin/kin-openapi/openapi3"
)

// SPEC §15: byte caps are not maxLength (JSON Schema counts characters: an SDK checking it
// would pass 150 "é", 300 bytes, under a 200-byte cap) and descriptions state every bound.
// Every x-max-bytes schema of the contract has no maxLength and names its number.
func TestByteCapsAreStatedNotMaxLength(t *testing.T) {
	doc, err := api.GetSwagger()
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	var walk func(at string, s *openapi3.Schema, depth int)
	walk = func(at string, s *openapi3.Schema, depth int) {
		if s == nil || depth > 8 {
			return
		}
		if v, ok := s.Extensions["x-max-bytes"]; ok {
			seen++
			n, _ := v.(float64)
			switch {
			case n <= 0 || n != float64(int64(n)):
				t.Errorf("%s: x-max-bytes %v is not a positive integer", at, v)
			case s.MaxLength != nil:
				t.Errorf("%s: a byte cap is also maxLength %d (SPEC §15: byte caps are not maxLength)", at, *s.MaxLength)
			case !strings.Contains(s.Description, strconv.FormatInt(int64(n), 10)+" UTF-8 bytes"):
				t.Errorf("%s: the description %q does not state the cap (%d UTF-8 bytes)", at, s.Description, int64(n))
			}
		}
		for name, p := range s.Properties {
			if p != nil && p.Ref == "" {
				walk(at+"."+name, p.Value, depth+1)
			}
		}
		if s.Items != nil && s.Items.Ref == "" {
			walk(at+"[]", s.Items.Value, depth+1)
		}
	}
	for name, ref := range doc.Components.Schemas {
		walk(name, ref.Value, 0)
	}
	if seen < 7 {
		t.Fatalf("found %d byte caps in the contract, want the 7 of internal/service/limits.go at least", seen)
	}
}
