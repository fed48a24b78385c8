package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"reflect"
	"regexp"
	"strconv"
	"strings"
)

// goAPI is what the generator reads back from oapi-codegen's output, so that
// the dispatch code uses the Go names oapi-codegen actually chose instead of
// re-deriving its naming rules.
type goAPI struct {
	methods map[string]goMethod // "METHOD /path" → method
	structs map[string]*ast.StructType
	types   map[string]bool
}

type goMethod struct {
	Name     string // StrictServerInterface method, e.g. CheckpointSave
	Request  string // e.g. CheckpointSaveRequestObject
	Response string // e.g. CheckpointSaveResponseObject
}

// goBinding is one operation's Go names.
type goBinding struct {
	Method       string
	Request      string
	PathFields   []string // Go field per path param (same order as PathParams)
	HasParams    bool     // the request object has a Params field
	ParamsType   string
	BodyType     string // the JSON body type (e.g. CheckpointSaveJSONRequestBody); "" when not decodable
	BodyField    string // the request object's field holding the JSON body: Body, or JSONBody when the operation also accepts other media types (e.g. multipart uploads, which MCP never carries)
	SuccessType  string // e.g. CheckpointSave200JSONResponse; "" when there is no JSON success type
	Undispatched string // reason the operation cannot be dispatched, "" when it can
}

var routeComment = regexp.MustCompile(`^\(([A-Z]+) (\S+)\)$`)

func loadGoAPI(path string) (*goAPI, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
	if err != nil {
		return nil, err
	}
	g := &goAPI{methods: map[string]goMethod{}, structs: map[string]*ast.StructType{}, types: map[string]bool{}}
	var iface *ast.InterfaceType
	for _, decl := range f.Decls {
		gd, ok := decl.(*ast.GenDecl)
		if !ok || gd.Tok != token.TYPE {
			continue
		}
		for _, spec := range gd.Specs {
			ts := spec.(*ast.TypeSpec)
			g.types[ts.Name.Name] = true
			switch t := ts.Type.(type) {
			case *ast.StructType:
				g.structs[ts.Name.Name] = t
			case *ast.InterfaceType:
				if ts.Name.Name == "StrictServerInterface" {
					iface = t
				}
			}
		}
	}
	if iface == nil {
		return nil, fmt.Errorf("%s: no StrictServerInterface (generate gen/api with strict-server: true)", path)
	}
	for _, m := range iface.Methods.List {
		ft, ok := m.Type.(*ast.FuncType)
		if !ok || len(m.Names) != 1 || m.Doc == nil {
			continue
		}
		var route string
		for _, c := range m.Doc.List {
			text := strings.TrimSpace(strings.TrimPrefix(c.Text, "//"))
			if sm := routeComment.FindStringSubmatch(text); sm != nil {
				route = sm[1] + " " + sm[2]
			}
		}
		if route == "" || len(ft.Params.List) != 2 || ft.Results == nil || len(ft.Results.List) != 2 {
			continue
		}
		req, _ := ft.Params.List[1].Type.(*ast.Ident)
		resp, _ := ft.Results.List[0].Type.(*ast.Ident)
		if req == nil || resp == nil {
			continue
		}
		g.methods[route] = goMethod{Name: m.Names[0].Name, Request: req.Name, Response: resp.Name}
	}
	return g, nil
}

// fieldsByTag maps json tag names to Go field names (and their types).
func fieldsByTag(st *ast.StructType) (byTag map[string]string, byName map[string]ast.Expr) {
	byTag, byName = map[string]string{}, map[string]ast.Expr{}
	for _, f := range st.Fields.List {
		for _, n := range f.Names {
			byName[n.Name] = f.Type
			if f.Tag == nil {
				continue
			}
			tag, err := strconv.Unquote(f.Tag.Value)
			if err != nil {
				continue
			}
			name, _, _ := strings.Cut(reflect.StructTag(tag).Get("json"), ",")
			if name != "" && name != "-" {
				byTag[name] = n.Name
			}
		}
	}
	return byTag, byName
}

// bind resolves the operation's Go names and checks that every parameter the
// dispatcher sets exists.
func (g *goAPI) bind(op *operation) error {
	m, ok := g.methods[op.Method+" "+op.Path]
	if !ok {
		return fmt.Errorf("no StrictServerInterface method for %s %s", op.Method, op.Path)
	}
	b := goBinding{Method: m.Name, Request: m.Request}
	st, ok := g.structs[m.Request]
	if !ok {
		return fmt.Errorf("request type %s not found", m.Request)
	}
	byTag, byName := fieldsByTag(st)
	for _, p := range op.PathParams {
		f, ok := byTag[p.Name]
		if !ok {
			return fmt.Errorf("%s has no field for path parameter %s", m.Request, p.Name)
		}
		b.PathFields = append(b.PathFields, f)
	}
	if pt, ok := byName["Params"]; ok {
		id, ok := pt.(*ast.Ident)
		if !ok {
			return fmt.Errorf("%s.Params has an unexpected type", m.Request)
		}
		b.HasParams, b.ParamsType = true, id.Name
		ps, ok := g.structs[id.Name]
		if !ok {
			return fmt.Errorf("params type %s not found", id.Name)
		}
		ptags, _ := fieldsByTag(ps)
		for _, p := range append(append([]param(nil), op.QueryParams...), op.HeaderParams...) {
			if _, ok := ptags[p.Name]; !ok {
				return fmt.Errorf("%s has no field for %s parameter %s", id.Name, p.In, p.Name)
			}
		}
	} else if len(op.QueryParams)+len(op.HeaderParams) > 0 {
		return fmt.Errorf("%s has no Params field", m.Request)
	}
	if op.HasBody {
		switch {
		case !op.BodyJSON:
			b.Undispatched = "the request body is not JSON"
		default:
			// With one media type oapi-codegen names the field Body; with several (JSON and
			// multipart/form-data) JSONBody. The dispatcher always fills the JSON one: tools
			// take JSON arguments only and never carry bytes.
			b.BodyField = "Body"
			bt, ok := byName["Body"]
			if !ok {
				b.BodyField = "JSONBody"
				bt, ok = byName["JSONBody"]
			}
			star, _ := bt.(*ast.StarExpr)
			var id *ast.Ident
			if star != nil {
				id, _ = star.X.(*ast.Ident)
			}
			if !ok || id == nil {
				return fmt.Errorf("%s has no JSON body field", m.Request)
			}
			b.BodyType = id.Name
		}
	}
	if op.Output != nil {
		name := m.Name + op.SuccessStatus + "JSONResponse"
		if !g.types[name] {
			return fmt.Errorf("success response type %s not found", name)
		}
		b.SuccessType = name
	} else if b.Undispatched == "" {
		b.Undispatched = "the success response is not JSON"
	}
	op.Go = b
	return nil
}
