package contract_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/contract"
)

type expectation struct {
	Source string `json:"source"`
	ID     string `json:"id"`
}

func diffDirs(t *testing.T, base, rev string, ab *contract.AcceptedBreaks) *contract.DiffReport {
	t.Helper()
	rep, err := contract.Diff(loadDir(t, base), loadDir(t, rev), ab)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func find(rep *contract.DiffReport, e expectation) []contract.Change {
	var out []contract.Change
	for _, c := range rep.Changes {
		if c.Source == e.Source && c.ID == e.ID {
			out = append(out, c)
		}
	}
	return out
}

func TestDiffIdenticalIsEmpty(t *testing.T) {
	good := filepath.Join("testdata", "good")
	rep := diffDirs(t, good, good, nil)
	if len(rep.Changes) != 0 {
		t.Errorf("changes between identical contracts: %v", rep.Changes)
	}
}

func TestDiffBreakingFixtures(t *testing.T) {
	good := filepath.Join("testdata", "good")
	covered := map[string]bool{}
	for _, path := range fixtures(t, "diff/breaking/*.json") {
		covered[strings.SplitN(filepath.Base(path), "_", 2)[0]] = true
	}
	for _, r := range contract.DiffRules {
		if strings.HasPrefix(r.ID, "TD") && !covered[r.ID] {
			t.Errorf("class %s %s has no fixture in testdata/diff/breaking", r.ID, r.Name)
		}
	}
	for _, path := range fixtures(t, "diff/breaking/*.json") {
		name := strings.TrimSuffix(filepath.Base(path), ".json")
		t.Run(name, func(t *testing.T) {
			fx := readFixture(t, path)
			var want expectation
			if err := json.Unmarshal(fx.Expect, &want); err != nil {
				t.Fatal(err)
			}
			rep := diffDirs(t, good, materialize(t, fx.Patches), nil)
			got := find(rep, want)
			if len(got) == 0 {
				t.Fatalf("%s (%s): no %s %s change in %v", name, fx.Why, want.Source, want.ID, rep.Changes)
			}
			for _, c := range got {
				if c.Level != contract.LevelBreaking {
					t.Errorf("%s is %s, want breaking", c, c.Level)
				}
				t.Logf("%s", c)
			}
			if rep.Breaking == 0 {
				t.Errorf("report counts no breaking change")
			}
		})
	}
}

func TestDiffSafeFixtures(t *testing.T) {
	good := filepath.Join("testdata", "good")
	covered := map[string]bool{}
	for _, path := range fixtures(t, "diff/safe/*.json") {
		covered[strings.SplitN(filepath.Base(path), "_", 2)[0]] = true
	}
	for _, r := range contract.DiffRules {
		if strings.HasPrefix(r.ID, "TS") && !covered[r.ID] {
			t.Errorf("class %s %s has no fixture in testdata/diff/safe", r.ID, r.Name)
		}
	}
	for _, path := range fixtures(t, "diff/safe/*.json") {
		name := strings.TrimSuffix(filepath.Base(path), ".json")
		t.Run(name, func(t *testing.T) {
			fx := readFixture(t, path)
			var want expectation
			if err := json.Unmarshal(fx.Expect, &want); err != nil {
				t.Fatal(err)
			}
			rep := diffDirs(t, good, materialize(t, fx.Patches), nil)
			got := find(rep, want)
			if len(got) == 0 {
				t.Fatalf("%s (%s): no %s %s change in %v", name, fx.Why, want.Source, want.ID, rep.Changes)
			}
			for _, c := range got {
				if c.Level != contract.LevelSafe {
					t.Errorf("%s is %s, want safe", c, c.Level)
				}
			}
			if rep.Breaking != 0 {
				for _, c := range rep.Changes {
					t.Logf("%s", c)
				}
				t.Errorf("an additive change reported %d breaking changes", rep.Breaking)
			}
		})
	}
}

func TestDiffAcceptedBreaks(t *testing.T) {
	good := filepath.Join("testdata", "good")
	fx := readFixture(t, filepath.Join("testdata", "diff", "breaking", "TD003_required-input-added.json"))
	rev := materialize(t, fx.Patches)

	accepted := filepath.Join(t.TempDir(), "accepted-breaks.json")
	write := func(v any) {
		data, _ := json.Marshal(v)
		if err := os.WriteFile(accepted, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(map[string]any{"accepted": []map[string]any{
		{"source": "tools", "id": "TD003", "subject": "agent_prime", "detail": "mode", "reason": "mode is needed by every client from v2 on; all known clients were updated"},
		{"source": "openapi", "id": "new-required-request-property", "subject": "agent_prime", "reason": "the same break seen through HTTP"},
		{"source": "tools", "id": "TD001", "subject": "inbox_list", "reason": "stale entry: matches nothing"},
	}})
	ab, err := contract.LoadAcceptedBreaks(accepted)
	if err != nil {
		t.Fatal(err)
	}
	rep := diffDirs(t, good, rev, ab)
	if rep.Breaking != 0 || rep.Accepted != 2 {
		t.Fatalf("breaking %d, accepted %d; want 0 and 2: %v", rep.Breaking, rep.Accepted, rep.Changes)
	}
	for _, c := range rep.Changes {
		if c.Accepted && c.AcceptedReason == "" {
			t.Errorf("accepted change without its reason: %s", c)
		}
	}
	if len(rep.Unused) != 1 || rep.Unused[0].ID != "TD001" {
		t.Errorf("unused accepted entries: %+v", rep.Unused)
	}

	// An entry for another field does not accept this break.
	write(map[string]any{"accepted": []map[string]any{
		{"source": "tools", "id": "TD003", "subject": "agent_prime", "detail": "other_field", "reason": "x"},
	}})
	ab, err = contract.LoadAcceptedBreaks(accepted)
	if err != nil {
		t.Fatal(err)
	}
	if rep := diffDirs(t, good, rev, ab); rep.Breaking == 0 {
		t.Errorf("an entry for another field accepted the break")
	}

	// A break without a reason is not a reviewed break.
	write(map[string]any{"accepted": []map[string]any{{"source": "tools", "id": "TD003", "subject": "agent_prime", "reason": " "}}})
	if _, err := contract.LoadAcceptedBreaks(accepted); err == nil || !strings.Contains(err.Error(), "reason") {
		t.Errorf("accepted entry without a reason loaded: %v", err)
	}
}

// gitRepo makes a repository whose HEAD~1 holds the good contract in spec/ and whose
// HEAD holds it with the patches applied.
func gitRepo(t *testing.T, patches []patch) string {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	repo := t.TempDir()
	gitRun := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.name=test", "-c", "user.email=test@example.invalid", "-c", "commit.gpgsign=false"}, args...)...)
		cmd.Dir = repo
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	copyDir := func(from string) {
		spec := filepath.Join(repo, "spec")
		if err := os.MkdirAll(spec, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, n := range []string{contract.OpenAPIFile, contract.ToolsFile} {
			data, err := os.ReadFile(filepath.Join(from, n))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(spec, n), data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	gitRun("init", "-q")
	copyDir(filepath.Join("testdata", "good"))
	gitRun("add", "spec")
	gitRun("commit", "-q", "-m", "base")
	copyDir(materialize(t, patches))
	gitRun("add", "spec")
	gitRun("commit", "-q", "-m", "rev")
	return repo
}

func TestDiffGitRevisions(t *testing.T) {
	// One input break (needs both files to see through the tool) and one registry break.
	var patches []patch
	for _, name := range []string{"TD003_required-input-added.json", "TD008_annotation-changed.json"} {
		patches = append(patches, readFixture(t, filepath.Join("testdata", "diff", "breaking", name)).Patches...)
	}
	repo := gitRepo(t, patches)
	inputBreak := expectation{"tools", "TD003"}
	registryBreak := expectation{"tools", "TD008"}
	httpBreak := expectation{"openapi", "new-required-request-property"}
	for _, tc := range []struct {
		base, rev string
		want      []expectation
		notWant   []expectation
	}{
		{"HEAD~1", "HEAD", []expectation{inputBreak, registryBreak, httpBreak}, nil},
		{"HEAD~1:spec", "HEAD:spec", []expectation{inputBreak, registryBreak, httpBreak}, nil},
		{"HEAD~1:spec/tool-contracts.json", "HEAD:spec/tool-contracts.json", []expectation{registryBreak}, []expectation{inputBreak, httpBreak}},
		{"HEAD~1:spec/openapi.json", "HEAD:spec/openapi.json", []expectation{httpBreak}, []expectation{inputBreak, registryBreak}},
		{"HEAD~1:spec/openapi.json,HEAD~1:spec/tool-contracts.json", "HEAD:spec/openapi.json,HEAD:spec/tool-contracts.json", []expectation{inputBreak, registryBreak, httpBreak}, nil},
	} {
		t.Run(tc.base, func(t *testing.T) {
			load := func(ref string) *contract.Contract {
				src, err := contract.Resolve(ref, "spec", repo)
				if err != nil {
					t.Fatal(err)
				}
				c, err := contract.Load(src)
				if err != nil {
					t.Fatal(err)
				}
				return c
			}
			rep, err := contract.Diff(load(tc.base), load(tc.rev), nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range tc.want {
				if len(find(rep, e)) == 0 {
					t.Errorf("no %v in %v", e, rep.Changes)
				}
			}
			for _, e := range tc.notWant {
				if len(find(rep, e)) != 0 {
					t.Errorf("unexpected %v", e)
				}
			}
			if rep.Breaking == 0 {
				t.Errorf("no breaking change counted")
			}
		})
	}
	// HEAD against itself: nothing changed.
	for _, ref := range []string{"HEAD", "HEAD:spec"} {
		src, err := contract.Resolve(ref, "spec", repo)
		if err != nil {
			t.Fatal(err)
		}
		c, _ := contract.Load(src)
		rep, err := contract.Diff(c, c, nil)
		if err != nil || len(rep.Changes) != 0 {
			t.Errorf("%s vs itself: %v %v", ref, err, rep)
		}
	}
	for _, bad := range []string{"HEAD~5", "no-such-branch", "HEAD:nope/openapi.json"} {
		if _, err := contract.Resolve(bad, "spec", repo); err == nil {
			t.Errorf("Resolve(%q) succeeded", bad)
		}
	}
}
