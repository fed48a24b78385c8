package service_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/gen/api"
	"github.com/agentbox/agentbox/internal/service"
	"github.com/agentbox/agentbox/internal/testenv"
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

// The admin API's card and profile fields hold the same byte caps as the agent's (they were
// bounded by the schema's maxLength alone, in characters): one byte over, in two-byte
// characters (fewer characters than the cap), is LIMIT_EXCEEDED naming the field, nothing
// written; exactly at the cap is stored.
func TestAdminAgentFieldsHoldTheByteCaps(t *testing.T) {
	t.Parallel()
	e := testenv.New(t)
	e.Box("alpha")
	over := func(n int) string { return strings.Repeat("é", n/2) + "x" } // n+1 bytes, n/2+1 characters
	create := func(field, value string) func() testenv.Response {
		return func() testenv.Response {
			return e.Do("POST", "/admin/api/v1/boxes/alpha/agents", testenv.AdminToken,
				map[string]any{"host_name": "local", "name": "a-" + field, field: value}, nil)
		}
	}
	for _, c := range []struct {
		field string
		limit int
	}{{"role", service.CardRoleMaxBytes}, {"description", service.CardDescriptionMaxBytes}, {"profile_text", service.ProfileMaxBytes}} {
		r := rejects(t, e, "create with "+c.field, create(c.field, over(c.limit)), "LIMIT_EXCEEDED", c.field+"_too_large", c.field)
		if lim, _ := r.JSON()["error"].(map[string]any)["limit"].(float64); int(lim) != c.limit {
			t.Errorf("%s: limit %s, want %d", c.field, r.Raw, c.limit)
		}
		if r := create(c.field, strings.Repeat("x", c.limit))(); r.Status != http.StatusOK {
			t.Errorf("%s at its cap: %d %s", c.field, r.Status, r.Raw)
		}
	}
	e.NewAgent("alpha", "b", nil)
	rejects(t, e, "profile set", func() testenv.Response {
		return e.Do("PUT", "/admin/api/v1/boxes/alpha/agents/b/profile", testenv.AdminToken, map[string]any{"text": over(service.ProfileMaxBytes)}, nil)
	}, "LIMIT_EXCEEDED", "text_too_large", "text")
}

// An agent name that reads as an agent ID (agent_ref takes names and IDs, IDs first) is
// refused: such an agent could never be named. Nothing is written.
func TestAgentNamesThatReadAsIDsAreRefused(t *testing.T) {
	t.Parallel()
	e := testenv.New(t)
	e.Box("alpha")
	for _, name := range []string{"0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d", "0a1b2c3d4e5f4a6b8c7d9e0f1a2b3c4d"} {
		rejects(t, e, "name "+name, func() testenv.Response {
			return e.Do("POST", "/admin/api/v1/boxes/alpha/agents", testenv.AdminToken, map[string]any{"host_name": "local", "name": name}, nil)
		}, "INVALID_ARGUMENT", "name_like_id", "name")
	}
	if r := e.Do("POST", "/admin/api/v1/boxes/alpha/agents", testenv.AdminToken, map[string]any{"host_name": "local", "name": "0a1b2c3d-build"}, nil); r.Status != http.StatusOK {
		t.Fatalf("a name with hex digits that is no UUID: %d %s", r.Status, r.Raw)
	}
}

// An argument error about the input as a whole still has its field, "" (SPEC §12: argument
// validation always yields field): an empty patch, a body that is not JSON.
func TestWholeInputErrorsHaveTheEmptyField(t *testing.T) {
	t.Parallel()
	e := testenv.New(t)
	e.Box("alpha")
	for name, r := range map[string]testenv.Response{
		"empty box patch": e.Do("PATCH", "/admin/api/v1/boxes/alpha", testenv.AdminToken, map[string]any{}, nil),
		"body not JSON":   e.Do("POST", "/admin/api/v1/boxes", testenv.AdminToken, "{", nil),
	} {
		if r.Code() != "INVALID_ARGUMENT" || !strings.Contains(string(r.Raw), `"field":""`) {
			t.Errorf("%s: %d %s", name, r.Status, r.Raw)
		}
	}
}
