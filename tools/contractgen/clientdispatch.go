package main

// clientdispatch.go generates gen/mcp/client.gen.go: CallHTTP, the dispatch table from an
// operationId and tool arguments onto the typed methods of gen/client. The stdio MCP
// process and the agent CLI forward every tool call through it, so neither hand-writes
// per-operation glue nor builds HTTP requests itself.

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/format"
	"go/parser"
	"go/printer"
	"go/token"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// clientPathFor is gen/client/client.gen.go beside the gen/api file the generator reads.
func clientPathFor(apiPath string) string {
	return filepath.Join(filepath.Dir(filepath.Dir(apiPath)), "client", "client.gen.go")
}

// clientMethod is one method of gen/client's *Client as the generated code calls it.
type clientMethod struct {
	Name       string
	PathTypes  []string // Go types of the path parameters, qualified for package mcp
	ParamsType string   // "" when the method takes no params struct
	WithBody   bool     // the (contentType, io.Reader) variant
}

// goClient is what the generator reads back from oapi-codegen's client output.
type goClient struct {
	byRoute map[string][]clientMethod // "METHOD /path" → its methods
	imports map[string]string         // package name → import path, for qualified types
	used    map[string]string         // imports the generated code needs
}

var correspondsRE = regexp.MustCompile("Corresponds with ([A-Z]+) (\\S+) \\(the `")

func loadGoClient(path string) (*goClient, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
	if err != nil {
		return nil, err
	}
	g := &goClient{byRoute: map[string][]clientMethod{}, imports: map[string]string{}, used: map[string]string{}}
	for _, imp := range f.Imports {
		p, _ := strconv.Unquote(imp.Path.Value)
		name := filepath.Base(p)
		if imp.Name != nil {
			name = imp.Name.Name
		}
		g.imports[name] = p
	}
	declared := map[string]bool{}
	for _, decl := range f.Decls {
		if gd, ok := decl.(*ast.GenDecl); ok && gd.Tok == token.TYPE {
			for _, s := range gd.Specs {
				declared[s.(*ast.TypeSpec).Name.Name] = true
			}
		}
	}
	for _, decl := range f.Decls {
		fd, ok := decl.(*ast.FuncDecl)
		if !ok || fd.Recv == nil || fd.Doc == nil || len(fd.Recv.List) != 1 {
			continue
		}
		if star, ok := fd.Recv.List[0].Type.(*ast.StarExpr); !ok || fmt.Sprint(star.X) != "Client" {
			continue
		}
		m := correspondsRE.FindStringSubmatch(fd.Doc.Text())
		if m == nil {
			continue
		}
		cm := clientMethod{Name: fd.Name.Name}
		params := fd.Type.Params.List
		// ctx first, reqEditors last; WithBody variants end with contentType, body.
		var names []string
		var types []ast.Expr
		for _, p := range params {
			for _, n := range p.Names {
				names = append(names, n.Name)
				types = append(types, p.Type)
			}
		}
		if len(names) < 2 || names[0] != "ctx" || names[len(names)-1] != "reqEditors" {
			return nil, fmt.Errorf("%s: unexpected signature of %s", path, fd.Name.Name)
		}
		names, types = names[1:len(names)-1], types[1:len(types)-1]
		if n := len(names); n >= 2 && names[n-2] == "contentType" && names[n-1] == "body" {
			cm.WithBody = true
			names, types = names[:n-2], types[:n-2]
		} else if n >= 1 && names[n-1] == "body" {
			continue // the typed-body variant; the raw variant is used instead
		}
		if n := len(names); n >= 1 && names[n-1] == "params" {
			star, ok := types[n-1].(*ast.StarExpr)
			if !ok {
				return nil, fmt.Errorf("%s: params of %s is not a pointer", path, fd.Name.Name)
			}
			cm.ParamsType = g.qualify(fset, star.X, declared)
			names, types = names[:n-1], types[:n-1]
		}
		for _, t := range types {
			cm.PathTypes = append(cm.PathTypes, g.qualify(fset, t, declared))
		}
		route := m[1] + " " + m[2]
		g.byRoute[route] = append(g.byRoute[route], cm)
	}
	return g, nil
}

// qualify prints a type of package client as seen from package mcp.
func (g *goClient) qualify(fset *token.FileSet, t ast.Expr, declared map[string]bool) string {
	switch x := t.(type) {
	case *ast.Ident:
		if declared[x.Name] {
			return "client." + x.Name
		}
		return x.Name
	case *ast.SelectorExpr:
		if pkg, ok := x.X.(*ast.Ident); ok {
			g.used[pkg.Name] = g.imports[pkg.Name]
		}
	}
	var buf bytes.Buffer
	printer.Fprint(&buf, fset, t) //nolint:errcheck
	return buf.String()
}

// method picks the client method for op: the raw-body variant for JSON bodies.
func (g *goClient) method(op *operation) (clientMethod, bool) {
	for _, m := range g.byRoute[op.Method+" "+op.Path] {
		if m.WithBody == op.HasBody && len(m.PathTypes) == len(op.PathParams) {
			return m, true
		}
	}
	return clientMethod{}, false
}

// emitClientDispatch writes client.gen.go. Operations whose body is not JSON (uploads)
// have no entry; CallHTTP reports them as not callable.
func emitClientDispatch(ops []*operation, clientPath string) ([]byte, error) {
	g, err := loadGoClient(clientPath)
	if err != nil {
		return nil, err
	}
	var fns strings.Builder
	var cases strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&fns, format, args...) }
	for _, op := range ops {
		if op.HasBody && !op.BodyJSON {
			continue
		}
		m, ok := g.method(op)
		if !ok {
			return nil, fmt.Errorf("%s: no gen/client method for %s %s (is gen/client up to date?)", op.ID, op.Method, op.Path)
		}
		fn := "call" + goName(op.ID)
		fmt.Fprintf(&cases, "\tcase %s:\n\t\treturn %s(ctx, c, args, editors)\n", strconv.Quote(op.ID), fn)
		w("func %s(ctx context.Context, c *client.Client, args map[string]json.RawMessage, editors []client.RequestEditorFn) (*http.Response, error) {\n", fn)
		call := []string{"ctx"}
		for i, p := range op.PathParams {
			w("\tvar p%d %s\n\tif err := clientArg(args, %s, &p%d); err != nil {\n\t\treturn nil, err\n\t}\n", i, m.PathTypes[i], strconv.Quote(p.Name), i)
			call = append(call, fmt.Sprintf("p%d", i))
		}
		if m.ParamsType != "" {
			w("\tvar params %s\n\tif err := clientObject(args, %s, &params); err != nil {\n\t\treturn nil, err\n\t}\n", m.ParamsType, quoteList(paramNames(op.QueryParams)))
			call = append(call, "&params")
		}
		if op.HasBody {
			switch {
			case op.BodyArg != "":
				w("\tbody := clientRaw(args, %s)\n", strconv.Quote(op.BodyArg))
			case op.BodyRest:
				var exclude []string
				exclude = append(exclude, paramNames(op.PathParams)...)
				exclude = append(exclude, paramNames(op.QueryParams)...)
				w("\tbody, err := clientRest(args, %s)\n\tif err != nil {\n\t\treturn nil, err\n\t}\n", quoteList(exclude))
			default:
				w("\tbody, err := clientFields(args, %s)\n\tif err != nil {\n\t\treturn nil, err\n\t}\n", quoteList(op.BodyFields))
			}
			call = append(call, `"application/json"`, "bytes.NewReader(body)")
		}
		call = append(call, "editors...")
		w("\treturn c.%s(%s)\n}\n\n", m.Name, strings.Join(call, ", "))
	}

	var b strings.Builder
	b.WriteString(header)
	b.WriteString("// Sources: spec/openapi.json, gen/client.\n\npackage mcp\n\nimport (\n")
	for _, p := range []string{"bytes", "context", "encoding/json", "errors", "fmt", "net/http"} {
		fmt.Fprintf(&b, "\t%q\n", p)
	}
	b.WriteString("\n\t\"github.com/agentbox/agentbox/gen/client\"\n")
	var extra []string
	for name, p := range g.used {
		extra = append(extra, fmt.Sprintf("\t%s %q\n", name, p))
	}
	sort.Strings(extra)
	for _, e := range extra {
		b.WriteString(e)
	}
	b.WriteString(")\n\n")
	b.WriteString(clientDispatchDoc)
	b.WriteString("func CallHTTP(ctx context.Context, c *client.Client, operationID string, args map[string]json.RawMessage, editors ...client.RequestEditorFn) (*http.Response, error) {\n\tswitch operationID {\n")
	b.WriteString(cases.String())
	b.WriteString("\t}\n\treturn nil, fmt.Errorf(\"mcp: operation %q cannot be called through the HTTP client\", operationID)\n}\n\n")
	b.WriteString(fns.String())
	b.WriteString(clientDispatchHelpers)
	out, err := format.Source([]byte(b.String()))
	if err != nil {
		return nil, fmt.Errorf("client.gen.go: %w", err)
	}
	return out, nil
}

const clientDispatchDoc = `// CallHTTP sends one operation to the HTTP API with the generated client. Path and query
// parameters and the JSON body come from the tool arguments (validate them against the
// operation's Input first); JSON values are forwarded as given. Header parameters such as
// Agentbox-Session and the credential are the caller's request editors. The response is
// returned as is; a decoding failure is an *ArgumentError naming the field.
`

const clientDispatchHelpers = `// clientArg decodes one argument into a path parameter.
func clientArg(args map[string]json.RawMessage, name string, dst any) error {
	raw, ok := args[name]
	if !ok || json.Unmarshal(raw, dst) != nil {
		return &ArgumentError{Field: name}
	}
	return nil
}

// clientObject decodes the named arguments (query parameters) into a params struct.
func clientObject(args map[string]json.RawMessage, names []string, dst any) error {
	obj := map[string]json.RawMessage{}
	for _, n := range names {
		if raw, ok := args[n]; ok {
			obj[n] = raw
		}
	}
	b, err := json.Marshal(obj)
	if err != nil {
		return &ArgumentError{}
	}
	if err := json.Unmarshal(b, dst); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return &ArgumentError{Field: te.Field}
		}
		return &ArgumentError{}
	}
	return nil
}

// clientFields is the JSON body object of the named arguments.
func clientFields(args map[string]json.RawMessage, names []string) ([]byte, error) {
	obj := map[string]json.RawMessage{}
	for _, n := range names {
		if raw, ok := args[n]; ok {
			obj[n] = raw
		}
	}
	b, err := json.Marshal(obj)
	if err != nil {
		return nil, &ArgumentError{}
	}
	return b, nil
}

// clientRest is the JSON body object of every argument not named in exclude.
func clientRest(args map[string]json.RawMessage, exclude []string) ([]byte, error) {
	skip := map[string]bool{}
	for _, n := range exclude {
		skip[n] = true
	}
	obj := map[string]json.RawMessage{}
	for k, v := range args {
		if !skip[k] {
			obj[k] = v
		}
	}
	b, err := json.Marshal(obj)
	if err != nil {
		return nil, &ArgumentError{}
	}
	return b, nil
}

// clientRaw is one argument sent as the whole body (empty when absent).
func clientRaw(args map[string]json.RawMessage, name string) []byte {
	return args[name]
}
`
