package contract_test

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
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

// A diff mode is one way of naming the two versions on the command line.
type diffMode struct {
	name string
	// openapiOnly modes see only openapi.json: they must be as strong as the others
	// for every change made in that file.
	openapiOnly bool
	refs        func(repo string) (base, rev string)
	inGit       bool
}

var diffModes = []diffMode{
	{name: "directory", refs: func(string) (string, string) { return "base", "rev" }},
	{name: "git revision", inGit: true, refs: func(string) (string, string) { return "HEAD~1", "HEAD" }},
	{name: "openapi file", openapiOnly: true, refs: func(string) (string, string) {
		return filepath.Join("base", contract.OpenAPIFile), filepath.Join("rev", contract.OpenAPIFile)
	}},
	{name: "git openapi file", openapiOnly: true, inGit: true, refs: func(string) (string, string) {
		return "HEAD~1:spec/" + contract.OpenAPIFile, "HEAD:spec/" + contract.OpenAPIFile
	}},
}

// fixtureRun holds one fixture pair laid out for every mode: base/ and rev/ spec
// directories, and a git repository whose HEAD~1 and HEAD hold them in spec/.
type fixtureRun struct {
	fx       fixture
	dir      string // holds base/ and rev/
	repo     string
	onlyOpen bool // every patch is in openapi.json
}

func layout(t *testing.T, fx fixture) *fixtureRun {
	t.Helper()
	base, rev := pair(t, fx)
	dir := t.TempDir()
	for name, from := range map[string]string{"base": base, "rev": rev} {
		if err := os.Rename(from, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	run := &fixtureRun{fx: fx, dir: dir, repo: gitRepo(t, filepath.Join(dir, "base"), filepath.Join(dir, "rev")), onlyOpen: true}
	for _, p := range append(append([]patch{}, fx.BasePatches...), fx.Patches...) {
		if p.File != contract.OpenAPIFile {
			run.onlyOpen = false
		}
	}
	return run
}

// diff runs contract diff in one mode the way the CLI does (Resolve, Load, Diff).
func (r *fixtureRun) diff(m diffMode) (*contract.DiffReport, error) {
	b, v := m.refs(r.repo)
	load := func(ref string) (*contract.Contract, error) {
		var src *contract.Source
		var err error
		if m.inGit {
			src, err = contract.Resolve(ref, "spec", r.repo)
		} else {
			src, err = contract.Resolve(filepath.Join(r.dir, ref), "spec", r.repo)
		}
		if err != nil {
			return nil, err
		}
		return contract.Load(src)
	}
	bc, err := load(b)
	if err != nil {
		return nil, err
	}
	rc, err := load(v)
	if err != nil {
		return nil, err
	}
	return contract.Diff(bc, rc, nil)
}

// matches finds the expected change; an openapi-only mode judges a tool's schema
// change on its operation, so the same class is reported with source openapi.
func matches(rep *contract.DiffReport, want expectation, m diffMode) []contract.Change {
	got := find(rep, want)
	if len(got) == 0 && m.openapiOnly && want.Source == "tools" {
		got = find(rep, expectation{"openapi", want.ID})
	}
	return got
}

var updateDocs = flag.Bool("update", false, "rewrite the fixture table in docs/contract.md")

// fixtureResult is one fixture's verdict in every mode ("" when the mode does not apply).
type fixtureResult struct {
	kind, name, why string
	want            expectation
	verdict         map[string]string
}

// TestDiffFixtures runs every fixture pair (breaking, safe and invalid) in every mode:
// a breaking pair must report its class as breaking, a safe pair its class as safe and
// nothing breaking, an invalid pair must be an error. Modes that see only openapi.json
// run for every pair whose changes are all in that file. The table of verdicts is
// docs/contract.md's fixture table (go test ./internal/contract -run TestDiffFixtures
// -update rewrites it).
func TestDiffFixtures(t *testing.T) {
	var mu sync.Mutex
	var results []*fixtureResult
	raised := map[string]bool{}
	covered := map[string]bool{}
	t.Run("pairs", func(t *testing.T) { // returns when every parallel pair is done
		for _, kind := range []string{"breaking", "safe", "invalid"} {
			for _, path := range fixtures(t, "diff/"+kind+"/*.json") {
				name := strings.TrimSuffix(filepath.Base(path), ".json")
				covered[strings.SplitN(name, "_", 2)[0]] = true
				fx := readFixture(t, path)
				res := &fixtureResult{kind: kind, name: name, why: fx.Why, verdict: map[string]string{}}
				if kind != "invalid" {
					if err := json.Unmarshal(fx.Expect, &res.want); err != nil {
						t.Fatalf("%s: %v", name, err)
					}
				}
				results = append(results, res)
				t.Run(kind+"/"+name, func(t *testing.T) {
					t.Parallel()
					run := layout(t, fx)
					for _, m := range diffModes {
						if m.openapiOnly && !run.onlyOpen {
							continue
						}
						rep, err := run.diff(m)
						verdict := judge(t, kind, res.want, m, rep, err)
						mu.Lock()
						res.verdict[m.name] = verdict
						if rep != nil {
							for _, c := range rep.Changes {
								if c.Level == contract.LevelBreaking {
									raised[c.ID] = true
								}
							}
						}
						mu.Unlock()
					}
				})
			}
		}
	})
	t.Run("coverage", func(t *testing.T) {
		for _, r := range contract.DiffRules {
			if !covered[r.ID] {
				t.Errorf("class %s %s has no fixture in testdata/diff", r.ID, r.Name)
			}
		}
		for id := range contract.OasdiffBreaking {
			if !raised[id] {
				t.Errorf("oasdiff check %s is raised to breaking but no fixture shows it", id)
			}
		}
	})
	t.Run("docs table", func(t *testing.T) { checkFixtureTable(t, results) })
}

// judge asserts one mode's outcome and names it for the table.
func judge(t *testing.T, kind string, want expectation, m diffMode, rep *contract.DiffReport, err error) string {
	t.Helper()
	if kind == "invalid" {
		if err == nil {
			t.Errorf("%s: diff of an invalid document gave a verdict: %d breaking", m.name, rep.Breaking)
			return "verdict given"
		}
		return "error (no verdict)"
	}
	if err != nil {
		t.Errorf("%s: %v", m.name, err)
		return "error"
	}
	got := matches(rep, want, m)
	if len(got) == 0 {
		t.Errorf("%s: no %s %s change in %v", m.name, want.Source, want.ID, rep.Changes)
		return "missed"
	}
	level := contract.LevelBreaking
	if kind == "safe" {
		level = contract.LevelSafe
	}
	for _, c := range got {
		if c.Level != level {
			t.Errorf("%s: %s is %s, want %s", m.name, c, c.Level, level)
			return c.Level
		}
	}
	switch {
	case kind == "breaking" && rep.Breaking == 0:
		t.Errorf("%s: the report counts no breaking change", m.name)
		return "not counted"
	case kind == "safe" && rep.Breaking != 0:
		t.Errorf("%s: an additive change reported %d breaking changes: %v", m.name, rep.Breaking, rep.Changes)
		return "breaking"
	}
	return level
}

const (
	tableBegin = "<!-- diff-fixtures:begin (generated by go test ./internal/contract -run TestDiffFixtures -update) -->"
	tableEnd   = "<!-- diff-fixtures:end -->"
)

func checkFixtureTable(t *testing.T, results []*fixtureResult) {
	var b strings.Builder
	b.WriteString("| fixture | change | class | expected |")
	for _, m := range diffModes {
		b.WriteString(" " + m.name + " |")
	}
	b.WriteString("\n|---|---|---|---|")
	for range diffModes {
		b.WriteString("---|")
	}
	b.WriteString("\n")
	for _, r := range results {
		class, expected := "—", "error"
		if r.kind != "invalid" {
			class, expected = r.want.Source+" `"+r.want.ID+"`", r.kind
		}
		fmt.Fprintf(&b, "| %s/%s | %s | %s | %s |", r.kind, r.name, strings.ReplaceAll(r.why, "|", "\\|"), class, expected)
		for _, m := range diffModes {
			v := r.verdict[m.name]
			if v == "" {
				v = "n/a (registry change)"
			}
			b.WriteString(" " + v + " |")
		}
		b.WriteString("\n")
	}
	table := b.String()
	path := filepath.Join("..", "..", "docs", "contract.md")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	i, j := strings.Index(doc, tableBegin), strings.Index(doc, tableEnd)
	if i < 0 || j < i {
		t.Fatalf("%s has no fixture table markers", path)
	}
	current := doc[i+len(tableBegin)+1 : j]
	if current == table {
		return
	}
	if *updateDocs {
		if err := os.WriteFile(path, []byte(doc[:i+len(tableBegin)+1]+table+doc[j:]), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("the fixture table in %s is stale; run go test ./internal/contract -run TestDiffFixtures -update", path)
}

// A registry without its OpenAPI document cannot be judged (its tools' inputs and
// outputs are the operations' schemas), and versions holding different files cannot
// be compared: both are errors, never a pass with a note.
func TestDiffRefusesPartialContracts(t *testing.T) {
	run := layout(t, readFixture(t, filepath.Join("testdata", "diff", "breaking", "TD004_input-field-removed.json")))
	reg := func(v string) string { return filepath.Join(run.dir, v, contract.ToolsFile) }
	open := func(v string) string { return filepath.Join(run.dir, v, contract.OpenAPIFile) }
	for _, tc := range []struct{ base, rev string }{
		{reg("base"), reg("rev")},
		{"HEAD~1:spec/" + contract.ToolsFile, "HEAD:spec/" + contract.ToolsFile},
		{filepath.Join(run.dir, "base"), reg("rev")},
		{open("base"), filepath.Join(run.dir, "rev")},
		{open("base") + "," + reg("base"), open("rev")},
	} {
		t.Run(tc.base+" "+tc.rev, func(t *testing.T) {
			load := func(ref string) *contract.Contract {
				src, err := contract.Resolve(ref, "spec", run.repo)
				if err != nil {
					t.Fatal(err)
				}
				c, err := contract.Load(src)
				if err != nil {
					t.Fatal(err)
				}
				return c
			}
			if rep, err := contract.Diff(load(tc.base), load(tc.rev), nil); err == nil {
				t.Fatalf("partial contracts compared: %d breaking, notes %v", rep.Breaking, rep.Notes)
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

// gitRepo makes a repository whose HEAD~1 holds the base spec directory in spec/ and
// whose HEAD holds the revision.
func gitRepo(t *testing.T, base, rev string) string {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatal("git is not installed")
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
	copyDir(base)
	gitRun("add", "spec")
	gitRun("commit", "-q", "-m", "base")
	copyDir(rev)
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
	repo := gitRepo(t, filepath.Join("testdata", "good"), materialize(t, patches))
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
		{"HEAD~1:spec/openapi.json", "HEAD:spec/openapi.json", []expectation{httpBreak, {"openapi", "TD003"}}, []expectation{inputBreak, registryBreak}},
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
