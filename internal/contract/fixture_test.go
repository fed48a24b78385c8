package contract_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/contract"
)

// fixture is a testdata/*.json mutation of the good contract in testdata/good: a list
// of JSON Patch operations (add, remove, replace) on either file.
type fixture struct {
	Why    string          `json:"why"`
	Expect json.RawMessage `json:"expect"`
	// BasePatches make the base of the pair from the good contract (most pairs use it
	// as is); Patches make the revision from the same good contract.
	BasePatches []patch `json:"base_patches,omitempty"`
	Patches     []patch `json:"patches"`
}

type patch struct {
	File  string `json:"file"`
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value"`
}

func readFixture(t *testing.T, path string) fixture {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var f fixture
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return f
}

// materialize writes testdata/good with the patches applied into a new directory.
func materialize(t *testing.T, patches []patch) string {
	t.Helper()
	dir := t.TempDir()
	for _, name := range []string{contract.OpenAPIFile, contract.ToolsFile, "eval-baseline.json"} {
		data, err := os.ReadFile(filepath.Join("testdata", "good", name))
		if err != nil {
			t.Fatal(err)
		}
		var ps []patch
		for _, p := range patches {
			if p.File == name {
				ps = append(ps, p)
			}
		}
		if len(ps) > 0 {
			dec := json.NewDecoder(bytes.NewReader(data))
			dec.UseNumber()
			var doc any
			if err := dec.Decode(&doc); err != nil {
				t.Fatal(err)
			}
			for _, p := range ps {
				if doc, err = applyPatch(doc, p); err != nil {
					t.Fatalf("patch %s %s %s: %v", p.File, p.Op, p.Path, err)
				}
			}
			if data, err = json.MarshalIndent(doc, "", "  "); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func unescape(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~1", "/"), "~0", "~")
}

// applyPatch applies one RFC 6902 add/remove/replace operation.
func applyPatch(doc any, p patch) (any, error) {
	toks := strings.Split(strings.TrimPrefix(p.Path, "/"), "/")
	var rec func(cur any, toks []string) (any, error)
	rec = func(cur any, toks []string) (any, error) {
		tok := unescape(toks[0])
		last := len(toks) == 1
		switch c := cur.(type) {
		case map[string]any:
			if last {
				_, exists := c[tok]
				switch p.Op {
				case "add":
					c[tok] = p.Value
				case "replace":
					if !exists {
						return nil, errNoPath
					}
					c[tok] = p.Value
				case "remove":
					if !exists {
						return nil, errNoPath
					}
					delete(c, tok)
				}
				return c, nil
			}
			child, ok := c[tok]
			if !ok {
				return nil, errNoPath
			}
			v, err := rec(child, toks[1:])
			if err != nil {
				return nil, err
			}
			c[tok] = v
			return c, nil
		case []any:
			i := len(c)
			if tok != "-" {
				n, err := strconv.Atoi(tok)
				if err != nil || n < 0 || n > len(c) {
					return nil, errNoPath
				}
				i = n
			}
			if last {
				switch p.Op {
				case "add":
					c = append(c[:i], append([]any{p.Value}, c[i:]...)...)
				case "replace":
					if i >= len(c) {
						return nil, errNoPath
					}
					c[i] = p.Value
				case "remove":
					if i >= len(c) {
						return nil, errNoPath
					}
					c = append(c[:i], c[i+1:]...)
				}
				return c, nil
			}
			if i >= len(c) {
				return nil, errNoPath
			}
			v, err := rec(c[i], toks[1:])
			if err != nil {
				return nil, err
			}
			c[i] = v
			return c, nil
		}
		return nil, errNoPath
	}
	return rec(doc, toks)
}

type patchError string

func (e patchError) Error() string { return string(e) }

const errNoPath = patchError("path does not exist")

func loadDir(t *testing.T, dir string) *contract.Contract {
	t.Helper()
	src, err := contract.LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	c, err := contract.Load(src)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func fixtures(t *testing.T, glob string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", glob))
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixtures %s: %v", glob, err)
	}
	return files
}

// pair materializes a fixture pair: the base is the good contract with BasePatches
// applied, the revision the base with Patches applied.
func pair(t *testing.T, fx fixture) (base, rev string) {
	t.Helper()
	return materialize(t, fx.BasePatches), materialize(t, append(append([]patch{}, fx.BasePatches...), fx.Patches...))
}
