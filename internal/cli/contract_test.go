package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func runCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := Run(args, strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

var goodFixture = filepath.Join("..", "contract", "testdata", "good")

// copyFixture copies the good contract fixture, applying literal text replacements.
func copyFixture(t *testing.T, repl map[string][2]string) string {
	t.Helper()
	dir := t.TempDir()
	for _, n := range []string{"openapi.json", "tool-contracts.json", "eval-baseline.json"} {
		data, err := os.ReadFile(filepath.Join(goodFixture, n))
		if err != nil {
			t.Fatal(err)
		}
		if r, ok := repl[n]; ok {
			if !bytes.Contains(data, []byte(r[0])) {
				t.Fatalf("%s does not contain %q", n, r[0])
			}
			data = bytes.Replace(data, []byte(r[0]), []byte(r[1]), 1)
		}
		if err := os.WriteFile(filepath.Join(dir, n), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestContractLintExitStatus(t *testing.T) {
	if code, out, errs := runCLI(t, "contract", "lint", "--spec-dir", filepath.Join("..", "..", "spec")); code != ExitOK {
		t.Fatalf("lint of the real spec: exit %d\n%s%s", code, out, errs)
	}
	bad := copyFixture(t, map[string][2]string{"tool-contracts.json": {`"name": "room_list"`, `"name": "rooms_browse"`}})
	code, out, _ := runCLI(t, "contract", "lint", "--spec-dir", bad)
	if code != ExitFailure {
		t.Fatalf("lint of a bad spec: exit %d, want %d\n%s", code, ExitFailure, out)
	}
	// One line per finding: file#pointer: ID name: message.
	if !strings.Contains(out, filepath.Join(bad, "tool-contracts.json")+"#/tools/4/name: TC001 tool-name-grammar: ") {
		t.Errorf("finding does not name the file and pointer:\n%s", out)
	}
	code, out, _ = runCLI(t, "contract", "lint", "--json", "--spec-dir", bad)
	var rep struct {
		OK       bool `json:"ok"`
		Errors   int  `json:"errors"`
		Findings []struct {
			Rule, File, Pointer, Message string
		} `json:"findings"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil || code != ExitFailure || rep.OK || rep.Errors == 0 || rep.Findings[0].Pointer == "" {
		t.Errorf("--json: exit %d, %v, %+v", code, err, rep)
	}
	if code, _, _ := runCLI(t, "contract", "lint", "--spec-dir", filepath.Join(t.TempDir(), "missing")); code != ExitUsage {
		t.Errorf("missing spec dir: exit %d, want %d", code, ExitUsage)
	}
	if code, out, _ := runCLI(t, "contract", "lint", "--rules"); code != ExitOK || !strings.Contains(out, "TC010 pagination-shape") {
		t.Errorf("--rules: exit %d\n%s", code, out)
	}
}

func TestContractDiffExitStatus(t *testing.T) {
	breaking := copyFixture(t, map[string][2]string{"tool-contracts.json": {`"permission_class": "read_only"`, `"permission_class": "agent_mutation"`}})
	code, out, errs := runCLI(t, "contract", "diff", goodFixture, breaking)
	if code != ExitFailure || !strings.Contains(out, "BREAKING tools   TD009 side-effect-changed") {
		t.Fatalf("breaking diff: exit %d\n%s%s", code, out, errs)
	}
	safe := copyFixture(t, map[string][2]string{"tool-contracts.json": {`"aliases": []`, `"aliases": ["prime"]`}})
	code, out, errs = runCLI(t, "contract", "diff", goodFixture, safe, "--json")
	var rep struct {
		Breaking int `json:"breaking"`
		Safe     int `json:"safe"`
		Changes  []struct{ ID, Level string }
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil || code != ExitOK || rep.Breaking != 0 || rep.Safe == 0 {
		t.Fatalf("safe diff: exit %d %v %+v\n%s", code, err, rep, errs)
	}

	accepted := filepath.Join(t.TempDir(), "accepted.json")
	os.WriteFile(accepted, []byte(`{"accepted":[{"source":"tools","id":"TD009","subject":"checkpoint_get","reason":"reviewed: checkpoint_get records receipts from now on"}]}`), 0o644)
	code, out, _ = runCLI(t, "contract", "diff", "--accepted", accepted, goodFixture, breaking)
	if code != ExitOK || !strings.Contains(out, "ACCEPTED") || !strings.Contains(out, "reviewed: checkpoint_get") {
		t.Errorf("accepted break: exit %d\n%s", code, out)
	}
	if code, _, _ := runCLI(t, "contract", "diff", goodFixture); code != ExitUsage {
		t.Errorf("one argument: exit %d", code)
	}
	if code, _, _ := runCLI(t, "contract", "diff", goodFixture, filepath.Join(goodFixture, "openapi.json")); code != ExitUsage {
		t.Errorf("directory against a single file: exit %d", code)
	}
}

// Git revisions resolve against the working directory, as in CI's `contract diff HEAD~1 HEAD`.
func TestContractDiffGitRevisions(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	good, err := filepath.Abs(goodFixture)
	if err != nil {
		t.Fatal(err)
	}
	repo := t.TempDir()
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@example.invalid", "-c", "commit.gpgsign=false"}, args...)...)
		cmd.Dir = repo
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	put := func(name string, data []byte) {
		os.MkdirAll(filepath.Join(repo, "spec"), 0o755)
		if err := os.WriteFile(filepath.Join(repo, "spec", name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	git("init", "-q")
	for _, n := range []string{"openapi.json", "tool-contracts.json"} {
		data, _ := os.ReadFile(filepath.Join(good, n))
		put(n, data)
	}
	git("add", ".")
	git("commit", "-q", "-m", "base")
	data, _ := os.ReadFile(filepath.Join(good, "tool-contracts.json"))
	put("tool-contracts.json", bytes.Replace(data, []byte(`"rooms_list"`), []byte(`"room_browse"`), 1))
	git("commit", "-q", "-am", "drop an alias")

	t.Chdir(repo)
	code, out, errs := runCLI(t, "contract", "diff", "HEAD~1", "HEAD")
	if code != ExitFailure || !strings.Contains(out, "TD014 alias-removed") || !strings.Contains(out, "TS005 alias-added") {
		t.Errorf("HEAD~1 HEAD: exit %d\n%s%s", code, out, errs)
	}
	code, out, errs = runCLI(t, "contract", "diff", "HEAD~1:spec/openapi.json,HEAD~1:spec/tool-contracts.json", "HEAD:spec/openapi.json,HEAD:spec/tool-contracts.json")
	if code != ExitFailure || !strings.Contains(out, "TD014 alias-removed") {
		t.Errorf("REV:PATH pair: exit %d\n%s%s", code, out, errs)
	}
	// A registry alone cannot be judged: an error, never a pass with a note.
	code, out, errs = runCLI(t, "contract", "diff", "HEAD~1:spec/tool-contracts.json", "HEAD:spec/tool-contracts.json")
	if code != ExitUsage || !strings.Contains(errs, "only together with its OpenAPI document") {
		t.Errorf("registry alone: exit %d\n%s%s", code, out, errs)
	}
	// An invalid document gets no verdict.
	data, _ = os.ReadFile(filepath.Join(good, "openapi.json"))
	put("openapi.json", bytes.Replace(data, []byte(`"openapi": "3.0.3"`), []byte(`"openapi": "3.1.0"`), 1))
	git("commit", "-q", "-am", "not 3.0")
	if code, out, errs := runCLI(t, "contract", "diff", "HEAD~1", "HEAD"); code != ExitFailure || !strings.Contains(errs, "3.0") {
		t.Errorf("invalid document: exit %d\n%s%s", code, out, errs)
	}
	if code, _, errs := runCLI(t, "contract", "diff", "HEAD~7", "HEAD"); code != ExitUsage || !strings.Contains(errs, "HEAD~7") {
		t.Errorf("unknown revision: exit %d %s", code, errs)
	}
}

func TestContractEvalExitStatus(t *testing.T) {
	code, out, errs := runCLI(t, "contract", "eval", "--spec-dir", goodFixture)
	if code != ExitOK {
		t.Fatalf("eval of the good fixture: exit %d\n%s%s", code, out, errs)
	}
	for _, want := range []string{"accuracy  1.000", "margin    min", "overlap   max"} {
		if !strings.Contains(out, want) {
			t.Errorf("eval output lacks %q:\n%s", want, out)
		}
	}
	// room_list's description made to read like inbox_list's.
	collide := copyFixture(t, map[string][2]string{"tool-contracts.json": {
		`"List rooms I am a member of or invited to, paged by cursor."`,
		`"List rows addressed to me: unread by default, also all or acked. Records receipts, never acknowledges. Paged by cursor."`}})
	code, out, _ = runCLI(t, "contract", "eval", "--spec-dir", collide)
	if code != ExitFailure || !strings.Contains(out, "FAIL") {
		t.Errorf("colliding description: exit %d\n%s", code, out)
	}
	// --write-baseline records floors that the same registry then holds.
	dir := copyFixture(t, nil)
	if code, out, _ := runCLI(t, "contract", "eval", "--spec-dir", dir, "--write-baseline"); code != ExitOK || !strings.Contains(out, "wrote") {
		t.Fatalf("--write-baseline: exit %d\n%s", code, out)
	}
	if code, out, _ := runCLI(t, "contract", "eval", "--spec-dir", dir, "--json"); code != ExitOK || !json.Valid([]byte(out)) {
		t.Errorf("eval after recording: exit %d\n%s", code, out)
	}
}
