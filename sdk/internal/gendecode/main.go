// Command gendecode writes the SDK's pod decode functions, sdk/pod_decode.go,
// from the struct types in sdk/pod.go: one function per struct type (or the
// same code inline where a small type is used once), each a switch over the
// JSON names in the json tags, every case calling the decoder method for the
// field's type. Run it with go generate in sdk/ (see the directive in
// pod.go); TestGenerated fails when pod_decode.go is stale.
//
// What it reads besides pod.go's types and json tags:
//   - a parts:"P" tag on a field: the field is decoded only when the decoder's
//     parts include the Parts constant P (sdk.Reads), and skipped otherwise;
//   - decoder.go's decoder struct: a field of type []T, T a struct type, is
//     the arena that pointers to T come from; a block:"N" tag on it makes a
//     []T field go through decodeArray, its elements taken from the arena in
//     blocks of N. Other slices of a struct type grow in place (grow,
//     finishSlice).
//
// Pointers to scalars take their arenas from the scalar table below. A
// struct type of only non-struct fields that one field uses, and whose
// arrays do not go through decodeArray (which takes a function), is decoded
// inline at that field: in a Go wasm guest a call costs far more than the
// few instructions it would save. Every other struct type gets a function,
// decodeT(d *decoder, v *T).
//
// It uses only the standard library, and it is not part of the SDK's
// package graph: the SDK does not import it.
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"go/ast"
	"go/build"
	"go/format"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
)

// roots are the types decoded at the top of a message: pods and nodes, and
// a hook request's container (sdk.go). Each gets a function of its own.
var roots = []string{"Pod", "Node", "Container"}

// scalar is how a field of a basic type is decoded.
type scalar struct {
	setter string // the decoder method that assigns it
	arena  string // the decoder arena of pointers to it, "" if none
}

var scalars = map[string]scalar{
	"string": {"setStr", "strps"},
	"bool":   {"setBool", "bools"},
	"int32":  {"setInt32", "int32s"},
	"int64":  {"setInt64", "ints"},
	"uint64": {"setUint64", ""},
}

// scalarSlices are the slices of a basic type the decoder assigns whole.
var scalarSlices = map[string]string{
	"string": "setStrings",
	"int64":  "setInt64s",
}

// quantityMaps are named map[string]string types whose values may be JSON
// numbers, kept as written (Kubernetes quantities).
var quantityMaps = map[string]bool{"ResourceList": true}

func main() {
	dir := flag.String("dir", ".", "the sdk package's directory")
	out := flag.String("o", "pod_decode.go", "the output file (a relative name is in -dir)")
	flag.Parse()
	src, err := generate(*dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "gendecode:", err)
		os.Exit(1)
	}
	path := *out
	if !filepath.IsAbs(path) {
		path = filepath.Join(*dir, path)
	}
	if err := os.WriteFile(path, src, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "gendecode:", err)
		os.Exit(1)
	}
}

// field is a struct field the decoder fills.
type field struct {
	name  string   // Go name (the type's name for an embedded field)
	key   string   // JSON name
	typ   ast.Expr // Go type
	parts string   // Parts constant gating it, or ""
}

// structType is a struct type of the sdk package (or one it aliases).
type structType struct {
	name   string
	fields []field
	order  int // declaration order, for a stable output
}

// arena is a decoder field holding blocks of one struct type.
type arena struct {
	name  string
	block int // elements per fresh block for decodeArray; 0 if not an array arena
}

type gen struct {
	types  map[string]*structType // every struct type reachable from roots
	arenas map[string]arena       // element type name → arena
	uses   map[string]int         // struct type name → fields of that type, pointer or slice
	funcs  map[string]bool        // struct types that get a function
	buf    bytes.Buffer
}

// generate returns the formatted source of pod_decode.go for the sdk
// package in dir.
func generate(dir string) ([]byte, error) {
	decls, err := parseTypes(dir)
	if err != nil {
		return nil, err
	}
	g := &gen{types: map[string]*structType{}, arenas: map[string]arena{}, uses: map[string]int{}, funcs: map[string]bool{}}
	for _, r := range roots {
		if err := g.collect(decls, r); err != nil {
			return nil, err
		}
	}
	dec, ok := decls["decoder"]
	if !ok {
		return nil, errors.New("no decoder struct type")
	}
	for _, f := range dec.fields {
		if at, ok := f.typ.(*ast.ArrayType); ok && at.Len == nil {
			if id, ok := at.Elt.(*ast.Ident); ok && g.types[id.Name] != nil {
				a := arena{name: f.name}
				if b := f.tag.Get("block"); b != "" {
					if a.block, err = strconv.Atoi(b); err != nil || a.block < 2 {
						return nil, fmt.Errorf("decoder.%s: bad block tag %q", f.name, b)
					}
				}
				if _, dup := g.arenas[id.Name]; dup {
					return nil, fmt.Errorf("decoder: two arenas of %s", id.Name)
				}
				g.arenas[id.Name] = a
			}
		}
	}
	for _, r := range roots {
		g.funcs[r] = true
	}
	for name, t := range g.types {
		if !g.inline(t) {
			g.funcs[name] = true
		}
	}

	var names []string
	for name := range g.funcs {
		names = append(names, name)
	}
	sort.Slice(names, func(i, j int) bool { return g.types[names[i]].order < g.types[names[j]].order })

	g.printf("// Code generated by gendecode from pod.go and decoder.go; DO NOT EDIT.\n\n")
	g.printf("package sdk\n")
	for _, name := range names {
		t := g.types[name]
		g.printf("\n// decode%s decodes %s %s into *v.\n", name, article(name), name)
		g.printf("func decode%s(d *decoder, v *%s) {\n", name, name)
		if err := g.object(t, target{"v", true}); err != nil {
			return nil, err
		}
		g.printf("}\n")
	}
	src, err := format.Source(g.buf.Bytes())
	if err != nil {
		return nil, fmt.Errorf("format the output: %v\n%s", err, g.buf.Bytes())
	}
	return src, nil
}

// inline reports whether t is decoded where its one field is: a leaf (no
// struct fields) that is not a root, used by exactly one field, and not
// taken from an arena by decodeArray (which needs a function).
func (g *gen) inline(t *structType) bool {
	if g.uses[t.name] != 1 || g.arenas[t.name].block > 0 {
		return false
	}
	for _, r := range roots {
		if r == t.name {
			return false
		}
	}
	for _, f := range t.fields {
		if g.structOf(f.typ) != "" {
			return false
		}
	}
	return true
}

// structOf returns the struct type that typ is, points to or holds in a
// slice, or "".
func (g *gen) structOf(typ ast.Expr) string {
	switch t := typ.(type) {
	case *ast.StarExpr:
		return g.structOf(t.X)
	case *ast.ArrayType:
		return g.structOf(t.Elt)
	case *ast.Ident:
		if g.types[t.Name] != nil {
			return t.Name
		}
	}
	return ""
}

// collect adds the struct type name and every struct type its fields use.
func (g *gen) collect(decls map[string]*decl, name string) error {
	if g.types[name] != nil {
		return nil
	}
	dt, ok := decls[name]
	if !ok || dt.ambiguous {
		return fmt.Errorf("struct type %s: not declared once in the package", name)
	}
	if dt.err != nil {
		return dt.err
	}
	t := &structType{name: name, order: dt.order}
	g.types[name] = t
	for _, f := range dt.fields {
		key, _, _ := strings.Cut(f.tag.Get("json"), ",")
		if key == "-" || !f.embedded && !ast.IsExported(f.name) {
			continue // encoding/json ignores it too
		}
		if f.embedded && key == "" {
			return fmt.Errorf("%s embeds %s without a JSON name", name, f.name)
		}
		if key == "" {
			key = f.name
		}
		t.fields = append(t.fields, field{name: f.name, key: key, typ: f.typ, parts: f.tag.Get("parts")})
		elem := f.typ
		if s, ok := elem.(*ast.StarExpr); ok {
			elem = s.X
		} else if a, ok := elem.(*ast.ArrayType); ok && a.Len == nil {
			elem = a.Elt
		}
		if id, ok := elem.(*ast.Ident); ok {
			if d, ok := decls[id.Name]; ok && (d.isStruct || d.err != nil) {
				g.uses[id.Name]++
				if err := g.collect(decls, id.Name); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// target is where a struct value is decoded: an expression of its type,
// or of a pointer to it.
type target struct {
	expr string
	ptr  bool
}

func (t target) addr() string {
	if t.ptr {
		return t.expr
	}
	return "&" + t.expr
}

func (g *gen) printf(format string, args ...any) { fmt.Fprintf(&g.buf, format, args...) }

// object emits the loop over an object's members into x, of struct type t.
func (g *gen) object(t *structType, x target) error {
	g.printf("for n := 0; d.field(&n); {\nswitch string(d.key) {\n")
	for _, f := range t.fields {
		g.printf("case %q:\n", f.key)
		if f.parts != "" {
			g.printf("if d.parts&%s == 0 {\nd.skip()\ncontinue\n}\n", f.parts)
		}
		if err := g.value(t, f, x.expr+"."+f.name); err != nil {
			return err
		}
	}
	g.printf("default:\nd.skip()\n}\n}\n")
	return nil
}

// value emits the decoding of field f of t into the addressable expression x.
func (g *gen) value(t *structType, f field, x string) error {
	bad := func() error {
		return fmt.Errorf("%s.%s: the decoder has no way to decode a %s", t.name, f.name, exprString(f.typ))
	}
	switch typ := f.typ.(type) {
	case *ast.Ident:
		if s, ok := scalars[typ.Name]; ok {
			g.printf("d.%s(&%s)\n", s.setter, x)
			return nil
		}
		if quantityMaps[typ.Name] {
			g.printf("d.setStringMap((*map[string]string)(&%s), true)\n", x)
			return nil
		}
		if st := g.types[typ.Name]; st != nil {
			return g.call(st, target{x, false})
		}
	case *ast.StarExpr:
		id, ok := typ.X.(*ast.Ident)
		if !ok {
			return bad()
		}
		if s, ok := scalars[id.Name]; ok && s.arena != "" {
			g.printf("setPtr(d, &%s, &d.%s, (*decoder).%s)\n", x, s.arena, s.setter)
			return nil
		}
		st := g.types[id.Name]
		a, ok := g.arenas[id.Name]
		if st == nil || !ok {
			return bad()
		}
		g.printf("if d.null() {\n%s = nil\ncontinue\n}\n", x)
		g.printf("if %s == nil {\n%s = arenaNew(&d.%s)\n}\n", x, x, a.name)
		return g.call(st, target{x, true})
	case *ast.ArrayType:
		id, ok := typ.Elt.(*ast.Ident)
		if !ok || typ.Len != nil {
			return bad()
		}
		if setter, ok := scalarSlices[id.Name]; ok {
			g.printf("d.%s(&%s)\n", setter, x)
			return nil
		}
		st := g.types[id.Name]
		if st == nil {
			return bad()
		}
		if a := g.arenas[id.Name]; a.block > 0 {
			g.printf("decodeArray(d, &%s, &d.%s, %d, decode%s)\n", x, a.name, a.block, st.name)
			return nil
		}
		g.printf("s, isNull := %s[:0], false\n", x)
		g.printf("for n := 0; d.elem(&n, &isNull); {\ne := grow(&s)\n")
		if err := g.call(st, target{"e", true}); err != nil {
			return err
		}
		g.printf("}\n%s = finishSlice(s, isNull, d.err)\n", x)
		return nil
	case *ast.MapType:
		k, kok := typ.Key.(*ast.Ident)
		v, vok := typ.Value.(*ast.Ident)
		if kok && vok && k.Name == "string" && v.Name == "string" {
			g.printf("d.setStringMap(&%s, false)\n", x)
			return nil
		}
	}
	return bad()
}

// call emits the decoding of a struct of type st into x: its function, or
// its loop inline.
func (g *gen) call(st *structType, x target) error {
	if g.funcs[st.name] {
		g.printf("decode%s(d, %s)\n", st.name, x.addr())
		return nil
	}
	return g.object(st, x)
}

// decl is a type declared in the package (after resolving an alias).
type decl struct {
	isStruct  bool
	ambiguous bool  // declared more than once (files for different platforms)
	err       error // why an alias could not be resolved
	order     int
	fields    []declField
}

type declField struct {
	name     string
	embedded bool
	typ      ast.Expr
	tag      reflect.StructTag
}

// parseTypes parses the type declarations of the package in dir, except
// tests and the generated file. An alias of a struct type in an imported
// package (type EnvVar = abi.EnvVar) resolves to that struct.
func parseTypes(dir string) (map[string]*decl, error) {
	fset := token.NewFileSet()
	files, err := parseDir(fset, dir, func(name string) bool {
		return !strings.HasSuffix(name, "_test.go") && name != "pod_decode.go"
	})
	if err != nil {
		return nil, err
	}
	decls := map[string]*decl{}
	order := 0
	for _, file := range files {
		for _, d := range file.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.TYPE {
				continue
			}
			for _, spec := range gd.Specs {
				ts := spec.(*ast.TypeSpec)
				dt := &decl{order: order}
				order++
				typ := ts.Type
				if sel, ok := typ.(*ast.SelectorExpr); ok && ts.Assign.IsValid() {
					// Only an error if a decoded type uses it: most
					// aliases are of other kinds.
					if st, err := importedStruct(file, dir, sel); err != nil {
						dt.err = fmt.Errorf("type %s: %v", ts.Name.Name, err)
					} else {
						typ = st
					}
				}
				if st, ok := typ.(*ast.StructType); ok {
					dt.isStruct = true
					dt.fields = structFields(st)
				}
				if prev, dup := decls[ts.Name.Name]; dup {
					prev.ambiguous = true
					continue
				}
				decls[ts.Name.Name] = dt
			}
		}
	}
	return decls, nil
}

// importedStruct finds the struct type sel (pkg.Name) in the package file
// imports as pkg, located the way the go command does (modules, replace
// directives).
func importedStruct(file *ast.File, dir string, sel *ast.SelectorExpr) (*ast.StructType, error) {
	pkg, ok := sel.X.(*ast.Ident)
	if !ok {
		return nil, errors.New("not a package-qualified type")
	}
	path := ""
	for _, imp := range file.Imports {
		p, _ := strconv.Unquote(imp.Path.Value)
		name := p[strings.LastIndex(p, "/")+1:]
		if imp.Name != nil {
			name = imp.Name.Name
		}
		if name == pkg.Name {
			path = p
		}
	}
	if path == "" {
		return nil, fmt.Errorf("no import named %s", pkg.Name)
	}
	absDir, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	bp, err := build.Import(path, absDir, build.FindOnly)
	if err != nil {
		return nil, err
	}
	files, err := parseDir(token.NewFileSet(), bp.Dir, func(name string) bool { return !strings.HasSuffix(name, "_test.go") })
	if err != nil {
		return nil, err
	}
	for _, f := range files {
		for _, d := range f.Decls {
			if gd, ok := d.(*ast.GenDecl); ok && gd.Tok == token.TYPE {
				for _, spec := range gd.Specs {
					ts := spec.(*ast.TypeSpec)
					if st, ok := ts.Type.(*ast.StructType); ok && ts.Name.Name == sel.Sel.Name {
						return st, nil
					}
				}
			}
		}
	}
	return nil, fmt.Errorf("no struct type %s in %s", sel.Sel.Name, path)
}

// parseDir parses the .go files in dir that keep accepts, in name order.
func parseDir(fset *token.FileSet, dir string, keep func(string) bool) ([]*ast.File, error) {
	names, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	var files []*ast.File
	for _, name := range names {
		if !keep(filepath.Base(name)) {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		files = append(files, f)
	}
	return files, nil
}

func structFields(st *ast.StructType) []declField {
	var fields []declField
	for _, f := range st.Fields.List {
		var tag reflect.StructTag
		if f.Tag != nil {
			s, _ := strconv.Unquote(f.Tag.Value)
			tag = reflect.StructTag(s)
		}
		if len(f.Names) == 0 {
			name := exprString(f.Type)
			name = name[strings.LastIndex(name, ".")+1:]
			fields = append(fields, declField{name: strings.TrimPrefix(name, "*"), embedded: true, typ: f.Type, tag: tag})
			continue
		}
		for _, n := range f.Names {
			fields = append(fields, declField{name: n.Name, typ: f.Type, tag: tag})
		}
	}
	return fields
}

// article is the indefinite article for name.
func article(name string) string {
	if strings.ContainsRune("AEIOU", rune(name[0])) {
		return "an"
	}
	return "a"
}

// exprString prints a type expression.
func exprString(e ast.Expr) string {
	switch t := e.(type) {
	case *ast.Ident:
		return t.Name
	case *ast.StarExpr:
		return "*" + exprString(t.X)
	case *ast.SelectorExpr:
		return exprString(t.X) + "." + t.Sel.Name
	case *ast.ArrayType:
		if t.Len == nil {
			return "[]" + exprString(t.Elt)
		}
		return "[...]" + exprString(t.Elt)
	case *ast.MapType:
		return "map[" + exprString(t.Key) + "]" + exprString(t.Value)
	}
	return fmt.Sprintf("%T", e)
}
