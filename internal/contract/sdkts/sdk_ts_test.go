// Package sdkts_test proves SDK generation with tools nobody here wrote: it generates a
// TypeScript client from spec/openapi.json (openapi-typescript + openapi-fetch),
// type-checks it with tsc and runs tests/sdk-ts/src/flow.ts against a live server.
// It is its own package so that a broken server build never hides the contract tests.
package sdkts_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// projectDir is tests/sdk-ts, whose node_modules `npm ci` installs (.ci/run and
// `make sdk-ts-deps` do it).
func projectDir(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", "..", "..", "tests", "sdk-ts"))
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

func requireNode(t *testing.T) string {
	t.Helper()
	_, errNode := exec.LookPath("node")
	_, errNpm := exec.LookPath("npm")
	testenv.Need(t, errNode == nil && errNpm == nil, "Node.js and npm are not installed", "apt-get install -y nodejs npm, then make test")
	dir := projectDir(t)
	_, err := os.Stat(filepath.Join(dir, "node_modules", ".bin", "openapi-typescript"))
	testenv.Need(t, err == nil, "tests/sdk-ts/node_modules is missing", "make sdk-ts-deps (make test runs it)")
	return dir
}

// npm runs one package script; output is shown only when it fails.
func npm(t *testing.T, dir string, env []string, script string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "npm", "run", "--silent", script)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("npm run %s: %v\n%s", script, err, out.String())
	}
	return out.String()
}

func TestTypeScriptClientFlow(t *testing.T) {
	dir := requireNode(t)
	e := testenv.New(t)
	box := e.Box("sdk")
	a := e.NewAgent(box, "ts-sender", nil)
	b := e.NewAgent(box, "ts-receiver", nil)

	out := npm(t, dir, []string{
		"AGENTBOX_SERVER=" + e.URL,
		"AGENTBOX_BOX_KEY=" + box,
		"AGENTBOX_API_KEY=" + a.Key,
		"AGENTBOX_PEER_API_KEY=" + b.Key,
		"AGENTBOX_PEER_AGENT_ID=" + b.ID.String(),
	}, "test")
	t.Logf("\n%s", out)
	for _, want := range []string{"ok   agent_prime", "ok   checkpoint_save", "REVISION_CONFLICT", "sdk-ts flow: passed"} {
		if !strings.Contains(out, want) {
			t.Errorf("flow output lacks %q", want)
		}
	}
	for _, key := range []string{a.Key, b.Key} {
		if strings.Contains(out, key) {
			t.Errorf("the flow printed an API key")
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "generated", "schema.d.ts")); err != nil {
		t.Errorf("schema.d.ts was not generated: %v", err)
	}
}

// Redocly's recommended ruleset finds no error in the spec (warnings are allowed).
func TestRedoclyLint(t *testing.T) {
	dir := requireNode(t)
	out := npm(t, dir, nil, "lint:spec")
	t.Logf("\n%s", out)
	if !strings.Contains(out, "valid") {
		t.Errorf("redocly did not report the spec valid")
	}
}
