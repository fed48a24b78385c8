package contract_test

import (
	"encoding/json"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/contract"
)

func TestLintRealSpecIsClean(t *testing.T) {
	c := loadDir(t, filepath.Join("..", "..", "spec"))
	if len(c.Tools) == 0 || len(c.Ops) == 0 {
		t.Fatalf("the real spec loaded %d tools and %d operations", len(c.Tools), len(c.Ops))
	}
	for _, f := range contract.Lint(c) {
		if f.Severity == "error" {
			t.Errorf("%s", f)
		} else {
			t.Logf("%s", f)
		}
	}
}

func TestLintGoodFixtureIsClean(t *testing.T) {
	c := loadDir(t, filepath.Join("testdata", "good"))
	for _, f := range contract.Lint(c) {
		t.Errorf("%s", f)
	}
}

// Every rule has exactly one bad fixture, and that fixture trips that rule and no
// other: a fixture that also tripped a neighbour would not prove the rule works.
func TestLintEachRuleHasAFailingFixture(t *testing.T) {
	covered := map[string]bool{}
	for _, path := range fixtures(t, "lint/*.json") {
		covered[strings.SplitN(filepath.Base(path), "_", 2)[0]] = true
	}
	for _, r := range contract.Rules {
		if !covered[r.ID] {
			t.Errorf("rule %s %s has no failing fixture in testdata/lint", r.ID, r.Name)
		}
	}
	for _, path := range fixtures(t, "lint/*.json") {
		name := strings.TrimSuffix(filepath.Base(path), ".json")
		t.Run(name, func(t *testing.T) {
			fx := readFixture(t, path)
			var want string
			if err := json.Unmarshal(fx.Expect, &want); err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(name, want+"_") {
				t.Fatalf("fixture %s expects %s: name and expectation disagree", name, want)
			}
			dir := materialize(t, fx.Patches)
			fs := contract.Lint(loadDir(t, dir))
			if !contract.HasErrors(fs) {
				t.Fatalf("%s (%s): lint passed", name, fx.Why)
			}
			for _, f := range fs {
				if f.Rule != want {
					t.Errorf("unexpected %s", f)
				}
				// The message names the file and a JSON pointer into it.
				if f.File == "" || !strings.HasPrefix(f.File, dir) || (f.Pointer != "" && !strings.HasPrefix(f.Pointer, "/")) {
					t.Errorf("finding does not locate the problem: %+v", f)
				}
				if strings.Contains(f.Message, "\n") {
					t.Errorf("finding is not one line: %q", f.Message)
				}
				t.Logf("%s", f)
			}
		})
	}
}

func TestLintRuleIDsAreStableAndUnique(t *testing.T) {
	idRE := regexp.MustCompile(`^TC[0-9]{3}$`)
	nameRE := regexp.MustCompile(`^[a-z]+(-[a-z0-9]+)*$`)
	seen := map[string]bool{}
	for _, r := range contract.Rules {
		if !idRE.MatchString(r.ID) || !nameRE.MatchString(r.Name) || r.Summary == "" {
			t.Errorf("malformed rule %+v", r)
		}
		if seen[r.ID] || seen[r.Name] {
			t.Errorf("duplicate rule %s %s", r.ID, r.Name)
		}
		seen[r.ID], seen[r.Name] = true, true
	}
}

// Router tools are accepted in exactly the shape the MCP server registers them:
// operation_id null, exposure router_only, inline object schemas.
func TestLintRouterToolShape(t *testing.T) {
	for _, tc := range []struct {
		name    string
		patches []patch
	}{
		{"operation_id missing", []patch{{File: contract.ToolsFile, Op: "remove", Path: "/tools/5/operation_id"}}},
		{"operation_id string", []patch{{File: contract.ToolsFile, Op: "replace", Path: "/tools/5/operation_id", Value: "tool_search"}}},
		{"no inline output", []patch{{File: contract.ToolsFile, Op: "remove", Path: "/tools/5/output_schema"}}},
		{"inline schema on a default tool", []patch{{File: contract.ToolsFile, Op: "add", Path: "/tools/1/input_schema", Value: map[string]any{"type": "object"}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := contract.Lint(loadDir(t, materialize(t, tc.patches)))
			found := false
			for _, f := range fs {
				found = found || f.Rule == "TC004"
			}
			if !found {
				t.Errorf("no TC004 finding; got %v", fs)
			}
		})
	}
}

// TC014 asks every operation for 400 (a parameter, query key or header can be refused on
// any of them) and 503 (each reads the database), and every operation with a request body
// (the request bound) or a length-bounded path or query parameter for 422.
func TestLintAsksForTheRefusalsEveryOperationCanGive(t *testing.T) {
	dir := materialize(t, []patch{
		{File: "openapi.json", Op: "remove", Path: "/paths/~1api~1v1~1boxes~1{box_key}~1prime/post/responses/422"},
		{File: "openapi.json", Op: "remove", Path: "/paths/~1api~1v1~1boxes~1{box_key}~1me/get/responses/400"},
		{File: "openapi.json", Op: "remove", Path: "/paths/~1api~1v1~1boxes~1{box_key}~1checkpoint/get/responses/503"},
		{File: "openapi.json", Op: "add", Path: "/components/parameters/Cursor/schema/maxLength", Value: 2048},
	})
	var got []string
	for _, f := range contract.Lint(loadDir(t, dir)) {
		if f.Rule != "TC014" {
			t.Errorf("unexpected %s", f)
		}
		got = append(got, f.Message)
	}
	all := strings.Join(got, "\n")
	if len(got) != 5 || !strings.Contains(all, "agent_prime takes a request body but does not document 422") || !strings.Contains(all, "me_get does not document 400") ||
		!strings.Contains(all, "checkpoint_get does not document 503") || !strings.Contains(all, "inbox_list takes query parameter cursor with a length bound but does not document 422") ||
		!strings.Contains(all, "room_list takes query parameter cursor with a length bound but does not document 422") {
		t.Fatalf("findings:\n%s", all)
	}
}
