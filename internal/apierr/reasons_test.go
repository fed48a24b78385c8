package apierr_test

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/gen/mcp"
	"github.com/agentbox/agentbox/internal/apierr"
	"github.com/agentbox/agentbox/spec"
)

// The reasons the server can emit are the keys of x-reasons on ErrorDetail.reason in
// spec/openapi.json, both ways, each documented with exactly the codes it comes with.
//
// It lives here, beside TestCodesAreTheContracts, because every reason reaches the wire
// through this package: Error.Reason is set by WithReason, by a literal assignment, or by a
// constructor that passes a parameter on to one of them (TooLarge, Forbidden). The test reads
// the Go sources of internal/ (not tests, not gen/), finds every such place, follows
// reason-taking constructors to their callers, resolves each reason to its constant values
// (literals, package constants such as upload.Reason*, locals assigned from them) and each
// error to its code (the apierr.New or constructor at the root of its chain). A reason it
// cannot resolve fails the test until computedReasons enumerates it from its source of truth.
func TestReasonsAreTheContracts(t *testing.T) {
	documented := contractReasons(t)
	x := indexSources(t, filepath.Join("..", ".."))
	emitted := x.emittedReasons(t)

	for _, r := range slices.Sorted(maps.Keys(emitted)) {
		doc, ok := documented[r]
		if !ok {
			t.Errorf("reason %s (%s) is emitted at %s but not in ErrorDetail.reason x-reasons", r,
				strings.Join(emitted[r].codes(), ", "), strings.Join(emitted[r].where, "; "))
			continue
		}
		if got, want := slices.Sorted(slices.Values(doc.Codes)), emitted[r].codes(); !slices.Equal(got, want) {
			t.Errorf("reason %s: x-reasons lists codes %v, the server emits it with %v (%s)", r, got, want, strings.Join(emitted[r].where, "; "))
		}
	}
	for _, r := range slices.Sorted(maps.Keys(documented)) {
		if _, ok := emitted[r]; !ok {
			t.Errorf("x-reasons documents %s, which no code in internal/ emits (stale entry)", r)
		}
	}
	// x-reasons documents the HTTP contract: the tool schemas (gen/mcp, and so tools/list and
	// its size budget) never carry it (contractgen drops x- extensions).
	for id, op := range mcp.Operations {
		for _, doc := range [][]byte{op.InputSchema, op.OutputSchema, op.AdvertisedOutputSchema} {
			if strings.Contains(string(doc), `"x-reasons"`) {
				t.Errorf("%s: a tool schema carries x-reasons", id)
			}
		}
	}
	t.Logf("%d reasons", len(emitted))
}

// documentedReason is one entry of x-reasons.
type documentedReason struct {
	Codes   []string `json:"codes"`
	Meaning string   `json:"meaning"`
}

// contractReasons reads x-reasons and checks each entry's form.
func contractReasons(t *testing.T) map[string]documentedReason {
	t.Helper()
	var doc struct {
		Components struct {
			Schemas struct {
				ErrorCode struct {
					Enum []string `json:"enum"`
				} `json:"ErrorCode"`
				ErrorDetail struct {
					Properties struct {
						Reason struct {
							Pattern string                      `json:"pattern"`
							Reasons map[string]documentedReason `json:"x-reasons"`
						} `json:"reason"`
					} `json:"properties"`
				} `json:"ErrorDetail"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(spec.OpenAPI, &doc); err != nil {
		t.Fatal(err)
	}
	s := doc.Components.Schemas
	reason := s.ErrorDetail.Properties.Reason
	if len(reason.Reasons) == 0 {
		t.Error("spec/openapi.json: ErrorDetail.reason has no x-reasons")
	}
	pattern := regexp.MustCompile(reason.Pattern)
	for r, d := range reason.Reasons {
		if !pattern.MatchString(r) {
			t.Errorf("x-reasons: %s does not match the reason pattern %s", r, reason.Pattern)
		}
		if len(d.Codes) == 0 {
			t.Errorf("x-reasons: %s names no code", r)
		}
		for _, c := range d.Codes {
			if !slices.Contains(s.ErrorCode.Enum, c) {
				t.Errorf("x-reasons: %s names %s, which is not an ErrorCode", r, c)
			}
		}
		if m := strings.TrimSpace(d.Meaning); m == "" || len(m) > 160 || strings.Contains(m, "\n") {
			t.Errorf("x-reasons: %s needs a meaning of one short line (at most 160 bytes)", r)
		}
	}
	return reason.Reasons
}

// computedReasons enumerate the reasons built at run time, keyed by the function that builds
// them, from the contract they come from: apierr.TooLong and apierr.TooMany name the reason
// after the field (<leaf>_too_large, too_many_<leaf>), for a field over a maxLength or
// maxItems of a tool's input schema (schema violations, every transport) or over an
// x-max-bytes of a request body (the service's own byte checks, SPEC §15).
var computedReasons = map[string]func(t *testing.T) []string{
	module + "/internal/apierr.TooLong": func(t *testing.T) []string {
		var out []string
		for _, f := range slices.Concat(inputFields(t, "maxLength"), requestBodyFields(t, "x-max-bytes")) {
			out = append(out, apierr.TooLong(f, 1).Reason)
		}
		return out
	},
	module + "/internal/apierr.TooMany": func(t *testing.T) []string {
		var out []string
		for _, f := range inputFields(t, "maxItems") {
			out = append(out, apierr.TooMany(f, 1).Reason)
		}
		return out
	},
}

// inputFields are the field paths with keyword in every tool input schema the validators
// check (operations and router tools: gen/mcp, which drops x- extensions).
func inputFields(t *testing.T, keyword string) []string {
	var docs []json.RawMessage
	for _, id := range slices.Sorted(maps.Keys(mcp.Operations)) {
		docs = append(docs, mcp.Operations[id].InputSchema)
	}
	for _, tool := range mcp.Tools {
		if len(tool.InputSchema) > 0 {
			docs = append(docs, tool.InputSchema)
		}
	}
	fields := map[string]bool{}
	for _, raw := range docs {
		var doc map[string]any
		if err := json.Unmarshal(raw, &doc); err != nil {
			t.Fatal(err)
		}
		defs, _ := doc["$defs"].(map[string]any)
		boundedFields(t, doc, "", keyword, func(ref string) any { return defs[strings.TrimPrefix(ref, "#/$defs/")] }, nil, fields)
	}
	return slices.Sorted(maps.Keys(fields))
}

// requestBodyFields are the field paths with keyword in the JSON request bodies of
// spec/openapi.json (x- extensions, which the tool schemas do not carry).
func requestBodyFields(t *testing.T, keyword string) []string {
	var doc struct {
		Paths      map[string]map[string]json.RawMessage `json:"paths"`
		Components struct {
			Schemas map[string]any `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(spec.OpenAPI, &doc); err != nil {
		t.Fatal(err)
	}
	resolve := func(ref string) any { return doc.Components.Schemas[strings.TrimPrefix(ref, "#/components/schemas/")] }
	fields := map[string]bool{}
	for _, item := range doc.Paths {
		for _, raw := range item {
			var op struct {
				RequestBody struct {
					Content map[string]struct {
						Schema any `json:"schema"`
					} `json:"content"`
				} `json:"requestBody"`
			}
			if json.Unmarshal(raw, &op) != nil { // path-level parameters, not an operation
				continue
			}
			if c, ok := op.RequestBody.Content["application/json"]; ok {
				boundedFields(t, c.Schema, "", keyword, resolve, nil, fields)
			}
		}
	}
	return slices.Sorted(maps.Keys(fields))
}

// boundedFields adds to out the path (as schema.Violation names it: patch.role, files[0].url)
// of every node under node that has keyword.
func boundedFields(t *testing.T, node any, path, keyword string, resolve func(string) any, refs []string, out map[string]bool) {
	m, ok := node.(map[string]any)
	if !ok {
		return
	}
	if ref, ok := m["$ref"].(string); ok {
		if slices.Contains(refs, ref) {
			return
		}
		boundedFields(t, resolve(ref), path, keyword, resolve, append(refs, ref), out)
	}
	if _, ok := m[keyword]; ok {
		out[path] = true
	}
	props, _ := m["properties"].(map[string]any)
	for name, p := range props {
		sub := name
		if path != "" {
			sub = path + "." + name
		}
		boundedFields(t, p, sub, keyword, resolve, refs, out)
	}
	boundedFields(t, m["items"], path+"[0]", keyword, resolve, refs, out)
	for _, k := range []string{"anyOf", "oneOf", "allOf", "prefixItems"} {
		alts, _ := m[k].([]any)
		for _, a := range alts {
			boundedFields(t, a, path, keyword, resolve, refs, out)
		}
	}
	for _, k := range []string{"additionalProperties", "patternProperties"} {
		probe := map[string]bool{}
		boundedFields(t, m[k], path+".member", keyword, resolve, refs, probe)
		if k == "patternProperties" {
			pp, _ := m[k].(map[string]any)
			for _, v := range pp {
				boundedFields(t, v, path+".member", keyword, resolve, refs, probe)
			}
		}
		if len(probe) > 0 {
			t.Errorf("%s: a %s under %s names its reason after each member: enumerate them in computedReasons", path, keyword, k)
		}
	}
}

const module = "github.com/agentbox/agentbox"

// goFile is one parsed source file and the names its imports bind.
type goFile struct {
	pkg     string // import path
	name    string // path relative to the module root
	ast     *ast.File
	imports map[string]string // local name → import path
}

// sources indexes the module's Go sources: internal/ (where reasons are emitted) and the
// constants and functions of internal/ and gen/ those refer to.
type sources struct {
	fset   *token.FileSet
	emit   []*goFile
	consts map[string]constDecl       // "pkg.Name"
	funcs  map[string]funcDecl        // "pkg.Name" (functions, not methods)
	memo   map[*ast.FuncDecl][]string // codes a function's error results carry
}

type constDecl struct {
	f     *goFile
	value ast.Expr
}

type funcDecl struct {
	f  *goFile
	fd *ast.FuncDecl
}

func indexSources(t *testing.T, root string) *sources {
	t.Helper()
	x := &sources{fset: token.NewFileSet(), consts: map[string]constDecl{}, funcs: map[string]funcDecl{}, memo: map[*ast.FuncDecl][]string{}}
	for _, top := range []string{"internal", "gen"} {
		err := filepath.WalkDir(filepath.Join(root, top), func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if d.Name() == "testdata" || d.Name() == "node_modules" {
					return filepath.SkipDir
				}
				return nil
			}
			if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
				return nil
			}
			af, err := parser.ParseFile(x.fset, p, nil, parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, p)
			f := &goFile{pkg: module + "/" + filepath.ToSlash(filepath.Dir(rel)), name: filepath.ToSlash(rel), ast: af, imports: map[string]string{}}
			for _, im := range af.Imports {
				path, _ := strconv.Unquote(im.Path.Value)
				name := path[strings.LastIndex(path, "/")+1:]
				if im.Name != nil {
					name = im.Name.Name
				}
				f.imports[name] = path
			}
			for _, decl := range af.Decls {
				switch d := decl.(type) {
				case *ast.GenDecl:
					if d.Tok != token.CONST {
						continue
					}
					for _, s := range d.Specs {
						vs := s.(*ast.ValueSpec)
						for i, n := range vs.Names {
							if i < len(vs.Values) {
								x.consts[f.pkg+"."+n.Name] = constDecl{f, vs.Values[i]}
							}
						}
					}
				case *ast.FuncDecl:
					if d.Recv == nil {
						x.funcs[f.pkg+"."+d.Name.Name] = funcDecl{f, d}
					}
				}
			}
			if top == "internal" {
				x.emit = append(x.emit, f)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return x
}

// emission is one reason: the codes it comes with and where it is set.
type emission struct {
	byCode map[string]bool
	where  []string
}

func (e *emission) codes() []string { return slices.Sorted(maps.Keys(e.byCode)) }

// constructor is a function or method that sets the reason from one of its parameters.
type constructor struct {
	param int
	codes []string // a function's: the code of the error it returns (methods keep the receiver's)
}

// scope is where an expression is read: its file and enclosing function (nil at package level).
type scope struct {
	f  *goFile
	fn *ast.FuncDecl
}

func (x *sources) emittedReasons(t *testing.T) map[string]*emission {
	funcs := map[string]constructor{}   // "pkg.Name"
	methods := map[string]constructor{} // by method name: call sites do not say their receiver's type
	for {
		found := len(funcs) + len(methods)
		emitted := map[string]*emission{}
		var errs []string
		for _, f := range x.emit {
			for _, decl := range f.ast.Decls {
				sc := scope{f: f}
				if fd, ok := decl.(*ast.FuncDecl); ok {
					sc.fn = fd
				}
				ast.Inspect(decl, func(n ast.Node) bool {
					var reason ast.Expr
					var codes []string
					var err error
					switch n := n.(type) {
					case *ast.AssignStmt:
						for i, lhs := range n.Lhs {
							if sel, ok := lhs.(*ast.SelectorExpr); ok && sel.Sel.Name == "Reason" && len(n.Rhs) == len(n.Lhs) {
								reason = n.Rhs[i]
								codes, err = x.codeOf(sel.X, sc)
							}
						}
					case *ast.CompositeLit:
						if x.isErrorType(n.Type, sc) {
							for _, el := range n.Elts {
								if kv, ok := el.(*ast.KeyValueExpr); ok {
									if k, ok := kv.Key.(*ast.Ident); ok && k.Name == "Reason" {
										reason = kv.Value
									}
								}
							}
							if reason != nil {
								err = fmt.Errorf("an Error literal with a Reason: build it with New(...).WithReason")
							}
						}
					case *ast.CallExpr:
						if sel, ok := n.Fun.(*ast.SelectorExpr); ok && !x.isPackage(sel.X, sc) {
							if c, ok := methods[sel.Sel.Name]; ok && c.param < len(n.Args) {
								reason = n.Args[c.param]
								codes, err = x.codeOf(sel.X, sc)
							}
						} else if key, ok := x.funcKey(n.Fun, sc); ok {
							if c, ok := funcs[key]; ok && c.param < len(n.Args) {
								reason, codes = n.Args[c.param], c.codes
							}
						}
					}
					if reason == nil {
						return true
					}
					at := x.fset.Position(reason.Pos())
					where := fmt.Sprintf("%s:%d", f.name, at.Line)
					values, param, ok := x.stringsOf(reason, sc, 0)
					if param >= 0 && sc.fn.Recv != nil { // a method: its callers' receivers say the code
						methods[sc.fn.Name.Name] = constructor{param: param}
						return true
					}
					if err != nil {
						errs = append(errs, fmt.Sprintf("%s: the error's code: %v", where, err))
						return true
					}
					switch {
					case param >= 0:
						funcs[f.pkg+"."+sc.fn.Name.Name] = constructor{param: param, codes: codes}
						return true
					case !ok:
						fnName := "(package level)"
						if sc.fn != nil {
							fnName = f.pkg + "." + sc.fn.Name.Name
						}
						enumerate, known := computedReasons[fnName]
						if !known {
							errs = append(errs, fmt.Sprintf("%s: a reason computed at run time in %s: enumerate its values in computedReasons", where, fnName))
							return true
						}
						values = enumerate(t)
					}
					if len(codes) == 0 {
						errs = append(errs, where+": the error's code is unknown")
					}
					for _, v := range values {
						e := emitted[v]
						if e == nil {
							e = &emission{byCode: map[string]bool{}}
							emitted[v] = e
						}
						for _, c := range codes {
							e.byCode[c] = true
						}
						if !slices.Contains(e.where, where) {
							e.where = append(e.where, where)
						}
					}
					return true
				})
			}
		}
		if len(funcs)+len(methods) == found {
			for _, e := range errs {
				t.Error(e)
			}
			x.checkFieldReasons(t, emitted)
			return emitted
		}
	}
}

// checkFieldReasons checks that the TooLong and TooMany calls naming their field as a
// constant name a field computedReasons enumerates (a byte cap the contract does not state
// would otherwise go undocumented).
func (x *sources) checkFieldReasons(t *testing.T, emitted map[string]*emission) {
	for _, f := range x.emit {
		ast.Inspect(f.ast, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) == 0 {
				return true
			}
			key, ok := x.funcKey(call.Fun, scope{f: f})
			if !ok || (key != module+"/internal/apierr.TooLong" && key != module+"/internal/apierr.TooMany") {
				return true
			}
			fields, _, ok := x.stringsOf(call.Args[0], scope{f: f}, 0)
			for _, field := range fields {
				r := apierr.TooLong(field, 1).Reason
				if strings.HasSuffix(key, "TooMany") {
					r = apierr.TooMany(field, 1).Reason
				}
				if _, ok := emitted[r]; !ok {
					t.Errorf("%s:%d: %s(%q) gives reason %s, but the contract states no bound for such a field", f.name,
						x.fset.Position(call.Pos()).Line, key[strings.LastIndex(key, ".")+1:], field, r)
				}
			}
			return true
		})
	}
}

// stringsOf resolves a string expression to the constant values it can take; param is the
// index of the enclosing function's parameter it is (-1 if none); ok is false when it is
// computed at run time.
func (x *sources) stringsOf(e ast.Expr, sc scope, depth int) (values []string, param int, ok bool) {
	if depth > 20 {
		return nil, -1, false
	}
	switch e := e.(type) {
	case *ast.BasicLit:
		if e.Kind == token.STRING {
			s, err := strconv.Unquote(e.Value)
			return []string{s}, -1, err == nil
		}
	case *ast.ParenExpr:
		return x.stringsOf(e.X, sc, depth+1)
	case *ast.BinaryExpr:
		if e.Op != token.ADD {
			break
		}
		l, lp, lok := x.stringsOf(e.X, sc, depth+1)
		r, rp, rok := x.stringsOf(e.Y, sc, depth+1)
		if !lok || !rok || lp >= 0 || rp >= 0 {
			break
		}
		for _, a := range l {
			for _, b := range r {
				values = append(values, a+b)
			}
		}
		return values, -1, true
	case *ast.CallExpr: // a conversion: Code(api.ErrorCodeAUTHFAILED), string(x)
		if len(e.Args) == 1 && x.isConversion(e.Fun, sc) {
			return x.stringsOf(e.Args[0], sc, depth+1)
		}
	case *ast.Ident:
		if sc.fn != nil {
			if i := paramIndex(sc.fn, e.Name); i >= 0 {
				return nil, i, true
			}
			if rhs := assignments(sc.fn, e.Name); len(rhs) > 0 {
				for _, r := range rhs {
					v, p, ok := x.stringsOf(r, sc, depth+1)
					if !ok || p >= 0 {
						return nil, -1, false
					}
					for _, s := range v {
						if s != "" && !slices.Contains(values, s) { // "" is no reason
							values = append(values, s)
						}
					}
				}
				return values, -1, true
			}
		}
		if c, ok := x.consts[sc.f.pkg+"."+e.Name]; ok {
			return x.stringsOf(c.value, scope{f: c.f}, depth+1)
		}
	case *ast.SelectorExpr:
		if pkg, ok := e.X.(*ast.Ident); ok {
			if path, ok := sc.f.imports[pkg.Name]; ok {
				if c, ok := x.consts[path+"."+e.Sel.Name]; ok {
					return x.stringsOf(c.value, scope{f: c.f}, depth+1)
				}
			}
		}
	}
	return nil, -1, false
}

// codeOf is the code of the *Error an expression builds: apierr.New's first argument at the
// root of its With… chain, or the code of what the function it calls returns.
func (x *sources) codeOf(e ast.Expr, sc scope) ([]string, error) {
	switch e := e.(type) {
	case *ast.ParenExpr:
		return x.codeOf(e.X, sc)
	case *ast.CallExpr:
		if sel, ok := e.Fun.(*ast.SelectorExpr); ok && !x.isPackage(sel.X, sc) {
			if strings.HasPrefix(sel.Sel.Name, "With") {
				return x.codeOf(sel.X, sc)
			}
			return nil, fmt.Errorf("method %s", sel.Sel.Name)
		}
		key, ok := x.funcKey(e.Fun, sc)
		if !ok {
			return nil, fmt.Errorf("an unknown function")
		}
		if key == module+"/internal/apierr.New" {
			codes, p, ok := x.stringsOf(e.Args[0], sc, 0)
			if !ok || p >= 0 {
				return nil, fmt.Errorf("apierr.New with a code computed at run time")
			}
			return codes, nil
		}
		return x.funcCodes(x.funcs[key])
	case *ast.Ident:
		if sc.fn != nil {
			if rhs := assignments(sc.fn, e.Name); len(rhs) > 0 {
				var codes []string
				for _, r := range rhs {
					c, err := x.codeOf(r, sc)
					if err != nil {
						return nil, err
					}
					codes = append(codes, c...)
				}
				return codes, nil
			}
		}
		return nil, fmt.Errorf("%s is not assigned in its function", e.Name)
	}
	return nil, fmt.Errorf("%T", e)
}

// funcCodes is the union of the codes of the errors a function returns (its last result).
func (x *sources) funcCodes(d funcDecl) ([]string, error) {
	if codes, ok := x.memo[d.fd]; ok {
		return codes, nil
	}
	x.memo[d.fd] = nil // recursion: contributes nothing
	var codes []string
	var err error
	ast.Inspect(d.fd.Body, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.FuncLit:
			return false
		case *ast.ReturnStmt:
			if len(n.Results) == 0 || err != nil {
				return false
			}
			r := n.Results[len(n.Results)-1]
			if id, ok := r.(*ast.Ident); ok && id.Name == "nil" {
				return false
			}
			var c []string
			c, err = x.codeOf(r, scope{d.f, d.fd})
			codes = append(codes, c...)
		}
		return true
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", d.fd.Name.Name, err)
	}
	slices.Sort(codes)
	codes = slices.Compact(codes)
	x.memo[d.fd] = codes
	return codes, nil
}

// funcKey names the function a call expression calls ("pkg.Name"), if it is one of the module's.
func (x *sources) funcKey(fun ast.Expr, sc scope) (string, bool) {
	switch fun := fun.(type) {
	case *ast.Ident:
		key := sc.f.pkg + "." + fun.Name
		_, ok := x.funcs[key]
		return key, ok
	case *ast.SelectorExpr:
		if pkg, ok := fun.X.(*ast.Ident); ok {
			if path, ok := sc.f.imports[pkg.Name]; ok {
				key := path + "." + fun.Sel.Name
				_, ok := x.funcs[key]
				return key, ok
			}
		}
	}
	return "", false
}

// isPackage reports whether e names an imported package (pkg in pkg.F).
func (x *sources) isPackage(e ast.Expr, sc scope) bool {
	id, ok := e.(*ast.Ident)
	if !ok {
		return false
	}
	_, imported := sc.f.imports[id.Name]
	return imported && (sc.fn == nil || (paramIndex(sc.fn, id.Name) < 0 && len(assignments(sc.fn, id.Name)) == 0))
}

// isConversion reports whether fun is a conversion to a string type (string, apierr.Code).
func (x *sources) isConversion(fun ast.Expr, sc scope) bool {
	switch fun := fun.(type) {
	case *ast.Ident:
		return fun.Name == "string" || (fun.Name == "Code" && sc.f.pkg == module+"/internal/apierr")
	case *ast.SelectorExpr:
		pkg, ok := fun.X.(*ast.Ident)
		return ok && sc.f.imports[pkg.Name] == module+"/internal/apierr" && fun.Sel.Name == "Code"
	}
	return false
}

// isErrorType reports whether a composite literal's type is apierr.Error.
func (x *sources) isErrorType(typ ast.Expr, sc scope) bool {
	switch typ := typ.(type) {
	case *ast.Ident:
		return typ.Name == "Error" && sc.f.pkg == module+"/internal/apierr"
	case *ast.SelectorExpr:
		pkg, ok := typ.X.(*ast.Ident)
		return ok && sc.f.imports[pkg.Name] == module+"/internal/apierr" && typ.Sel.Name == "Error"
	}
	return false
}

// paramIndex is the index of fn's parameter called name, or -1.
func paramIndex(fn *ast.FuncDecl, name string) int {
	i := 0
	for _, field := range fn.Type.Params.List {
		if len(field.Names) == 0 {
			i++
		}
		for _, n := range field.Names {
			if n.Name == name {
				return i
			}
			i++
		}
	}
	return -1
}

// assignments are the values fn assigns to the local name (x := v, x = v, var x = v).
func assignments(fn *ast.FuncDecl, name string) []ast.Expr {
	var out []ast.Expr
	ast.Inspect(fn.Body, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.AssignStmt:
			if len(n.Lhs) != len(n.Rhs) {
				return true
			}
			for i, l := range n.Lhs {
				if id, ok := l.(*ast.Ident); ok && id.Name == name {
					out = append(out, n.Rhs[i])
				}
			}
		case *ast.ValueSpec:
			for i, id := range n.Names {
				if id.Name == name && i < len(n.Values) {
					out = append(out, n.Values[i])
				}
			}
		}
		return true
	})
	return out
}
