// Package contract checks the two hand-edited contract files, spec/openapi.json and
// spec/tool-contracts.json: lint (the rules of SPEC §13.6, each with a stable ID),
// diff (breaking versus additive changes between two versions, OpenAPI through oasdiff
// and the tool registry by the project's own rules) and eval (the deterministic
// tool-selection guard). It works on files, never on generated code, so that it can
// judge any spec directory, fixture or git revision.
package contract

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
)

// Default file names inside a spec directory.
const (
	OpenAPIFile = "openapi.json"
	ToolsFile   = "tool-contracts.json"
)

// Source is one version of the contract: the raw bytes of either file and a display
// name for each (a path, or REV:path for a git revision). A nil slice means that
// version does not include that file.
type Source struct {
	OpenAPI     []byte
	OpenAPIName string
	Tools       []byte
	ToolsName   string
}

// LoadDir reads both files of a spec directory; both must exist.
func LoadDir(dir string) (*Source, error) {
	src := &Source{OpenAPIName: filepath.Join(dir, OpenAPIFile), ToolsName: filepath.Join(dir, ToolsFile)}
	var err error
	if src.OpenAPI, err = os.ReadFile(src.OpenAPIName); err != nil {
		return nil, err
	}
	if src.Tools, err = os.ReadFile(src.ToolsName); err != nil {
		return nil, err
	}
	return src, nil
}

// Resolve turns a command-line reference into a Source. Accepted forms, tried in order:
//
//	DIR                   a spec directory (DIR/openapi.json and DIR/tool-contracts.json)
//	FILE                  one contract file; its kind is read from its content
//	A,B                   a pair of references, one per file (each a FILE or REV:PATH)
//	REV:PATH              git show REV:PATH; PATH is a file or a spec directory
//	REV                   a git revision: REV:<specDir>
//
// gitDir is the working directory for git ("" = current directory).
func Resolve(ref, specDir, gitDir string) (*Source, error) {
	if ref == "" {
		return nil, errors.New("empty contract reference")
	}
	if st, err := os.Stat(ref); err == nil {
		if st.IsDir() {
			return LoadDir(ref)
		}
		data, err := os.ReadFile(ref)
		if err != nil {
			return nil, err
		}
		return single(ref, data)
	}
	if strings.Contains(ref, ",") {
		parts := strings.Split(ref, ",")
		if len(parts) != 2 {
			return nil, fmt.Errorf("%q: a file pair is two references separated by one comma", ref)
		}
		a, err := Resolve(parts[0], specDir, gitDir)
		if err != nil {
			return nil, err
		}
		b, err := Resolve(parts[1], specDir, gitDir)
		if err != nil {
			return nil, err
		}
		return merge(ref, a, b)
	}
	rev, p, hasPath := strings.Cut(ref, ":")
	if !hasPath {
		p = specDir
	}
	if rev == "" {
		return nil, fmt.Errorf("%q is neither a file, a directory nor a git revision", ref)
	}
	if err := gitVerify(gitDir, rev); err != nil {
		return nil, fmt.Errorf("%q is neither a file, a directory nor a git revision: %w", ref, err)
	}
	kind, err := gitObjectType(gitDir, rev+":"+p)
	if err != nil {
		return nil, fmt.Errorf("%s:%s: %w", rev, p, err)
	}
	if kind == "tree" {
		src := &Source{OpenAPIName: rev + ":" + path.Join(p, OpenAPIFile), ToolsName: rev + ":" + path.Join(p, ToolsFile)}
		if src.OpenAPI, err = gitShow(gitDir, src.OpenAPIName); err != nil {
			return nil, err
		}
		if src.Tools, err = gitShow(gitDir, src.ToolsName); err != nil {
			return nil, err
		}
		return src, nil
	}
	data, err := gitShow(gitDir, rev+":"+p)
	if err != nil {
		return nil, err
	}
	return single(rev+":"+p, data)
}

// single classifies one file by content: a registry has "tools", an OpenAPI document
// has "openapi".
func single(name string, data []byte) (*Source, error) {
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(data, &probe); err != nil {
		return nil, fmt.Errorf("%s: not a JSON object: %w", name, err)
	}
	switch {
	case probe["openapi"] != nil:
		return &Source{OpenAPI: data, OpenAPIName: name}, nil
	case probe["tools"] != nil:
		return &Source{Tools: data, ToolsName: name}, nil
	}
	return nil, fmt.Errorf("%s: neither an OpenAPI document nor a tool registry", name)
}

func merge(ref string, a, b *Source) (*Source, error) {
	out := *a
	if b.OpenAPI != nil {
		if out.OpenAPI != nil {
			return nil, fmt.Errorf("%q: both files are OpenAPI documents", ref)
		}
		out.OpenAPI, out.OpenAPIName = b.OpenAPI, b.OpenAPIName
	}
	if b.Tools != nil {
		if out.Tools != nil {
			return nil, fmt.Errorf("%q: both files are tool registries", ref)
		}
		out.Tools, out.ToolsName = b.Tools, b.ToolsName
	}
	return &out, nil
}

func git(dir string, args ...string) ([]byte, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = err.Error()
		}
		return nil, errors.New(msg)
	}
	return out, nil
}

func gitVerify(dir, rev string) error {
	_, err := git(dir, "rev-parse", "--verify", "--quiet", "--end-of-options", rev+"^{commit}")
	if err != nil {
		return fmt.Errorf("unknown revision %q", rev)
	}
	return nil
}

func gitObjectType(dir, obj string) (string, error) {
	out, err := git(dir, "cat-file", "-t", obj)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(out)), nil
}

func gitShow(dir, obj string) ([]byte, error) {
	out, err := git(dir, "show", obj)
	if err != nil {
		return nil, fmt.Errorf("git show %s: %w", obj, err)
	}
	return out, nil
}
