package mcpserver_test

import (
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// The stdio process and the agent CLI reach the server only through gen/client (SPEC §1):
// this package (which `agentbox mcp` runs) must not depend on the service, the store, the
// database layer or agent authentication, and neither may the CLI files that use it.
var forbidden = []string{
	"github.com/agentbox/agentbox/internal/service",
	"github.com/agentbox/agentbox/internal/store",
	"github.com/agentbox/agentbox/internal/auth",
	"github.com/agentbox/agentbox/gen/db",
}

func TestNoServiceOrStoreDependency(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	out, err := exec.Command(goBin, "list", "-deps", "github.com/agentbox/agentbox/internal/mcpserver").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	deps := strings.Fields(string(out))
	for _, f := range forbidden {
		for _, d := range deps {
			if d == f {
				t.Errorf("internal/mcpserver depends on %s", f)
			}
		}
	}
	for _, file := range []string{"agent.go", "agentflags.go", "mcp.go"} {
		path := filepath.Join("..", "cli", file)
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			for _, bad := range forbidden {
				if p == bad {
					t.Errorf("internal/cli/%s imports %s", file, p)
				}
			}
		}
	}
}
