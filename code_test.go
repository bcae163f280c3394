package seckill_test

import (
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/seckill/seckill"
)

// TestCodeTable: every code has a status, a message and (but ok) a
// sentinel; an error is its code's whatever wraps it.
func TestCodeTable(t *testing.T) {
	for _, c := range seckill.Codes() {
		if c.HTTPStatus() < 200 || c.Message() == "" {
			t.Errorf("%s: status %d, message %q", c, c.HTTPStatus(), c.Message())
		}
		if c == seckill.CodeOK {
			if c.Err() != nil || seckill.CodeOf(nil) != c {
				t.Errorf("ok has the error %v", c.Err())
			}
			continue
		}
		if c.HTTPStatus() < 400 {
			t.Errorf("%s refuses with status %d", c, c.HTTPStatus())
		}
		for name, err := range map[string]error{
			"sentinel": c.Err(), "wrapped": fmt.Errorf("context: %w", c.Err()),
			"with a message": seckill.Errorf(c, "a message of its own"), "joined": errors.Join(errors.New("x"), c.Err()),
		} {
			if got := seckill.CodeOf(err); got != c {
				t.Errorf("%s %s: CodeOf = %s", c, name, got)
			}
			if !errors.Is(err, c.Err()) {
				t.Errorf("%s %s is not its sentinel", c, name)
			}
		}
		if p, ok := seckill.ParseCode(string(c)); !ok || p != c {
			t.Errorf("ParseCode(%q) = %v, %v", c, p, ok)
		}
	}
	if _, ok := seckill.ParseCode("no_such_code"); ok {
		t.Error("an unknown code parsed")
	}
	if c := seckill.CodeOf(errors.New("anything else")); c != seckill.CodeInternal {
		t.Errorf("an error of no code: %s", c)
	}
	if c := seckill.CodeOf(seckill.ErrPaymentExpired); c != seckill.CodeOrderCancelled {
		t.Errorf("an expired payment: %s", c)
	}
}

// scriptCodes reads a Lua script: the codes it can return, from its
// header's "Codes:" list (one per line: "--   code  what it means"), its
// body (the lines that are not comments at the margin), and the rest of
// its comments (where its fields, statuses and modes are documented).
func scriptCodes(src string) (codes []string, body, doc string) {
	listing := false
	var code, comments []string
	for _, l := range strings.Split(src, "\n") {
		if !strings.HasPrefix(l, "--") {
			code = append(code, l)
			listing = false
			continue
		}
		if m := codeLine.FindStringSubmatch(l); listing && m != nil {
			codes = append(codes, m[1])
			continue
		}
		if listing && strings.HasPrefix(l, "--    ") { // a code's explanation, continued
			continue
		}
		listing = strings.HasSuffix(strings.TrimSpace(l), "Codes:")
		comments = append(comments, l)
	}
	return codes, strings.Join(code, "\n"), strings.Join(comments, "\n")
}

var (
	codeLine   = regexp.MustCompile(`^--   ([a-z_]+)`)
	luaLiteral = regexp.MustCompile(`'([a-z_]+)`)
)

// TestScriptsReturnOnlyTableCodes: every code a Lua script lists as a
// return is in the table and is written by its body, and every code-like
// literal of its body (a word with an underscore, or a code of the table)
// is a code it lists or a word its comments document (a field, a status,
// a mode): a script cannot return a code the table lacks unnoticed.
func TestScriptsReturnOnlyTableCodes(t *testing.T) {
	paths, err := filepath.Glob("lua/*.lua")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no scripts: %v", err)
	}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		codes, body, doc := scriptCodes(string(b))
		listed := map[string]bool{}
		for _, c := range codes {
			listed[c] = true
			if _, ok := seckill.ParseCode(c); !ok {
				t.Errorf("%s lists code %q, which the table lacks", p, c)
			}
			if !strings.Contains(body, "'"+c) {
				t.Errorf("%s lists code %q but never writes it", p, c)
			}
		}
		for _, m := range luaLiteral.FindAllStringSubmatch(body, -1) {
			w := m[1]
			if _, isCode := seckill.ParseCode(w); listed[w] || !isCode && !strings.Contains(w, "_") {
				continue
			}
			if !regexp.MustCompile(`\b` + w + `\b`).MatchString(doc) {
				t.Errorf("%s writes %q, neither a code it lists nor a word its comments document", p, w)
			}
		}
	}
}

// TestEveryCodeIsProduced: the table holds no code that nothing can
// answer: each is listed by a script, or its constant or sentinel is used
// in the product's code outside this package's table.
func TestEveryCodeIsProduced(t *testing.T) {
	used := map[string]bool{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") && p != "." {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") || p == "code.go" ||
			strings.Contains(p, "servertest") || strings.HasPrefix(p, "cmd/seckill/bench") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch x := n.(type) {
			case *ast.SelectorExpr:
				if id, ok := x.X.(*ast.Ident); ok && id.Name == "seckill" {
					used[x.Sel.Name] = true
				}
			case *ast.Ident:
				if f.Name.Name == "seckill" {
					used[x.Name] = true
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	byScript := map[string]bool{}
	paths, _ := filepath.Glob("lua/*.lua")
	for _, p := range paths {
		b, _ := os.ReadFile(p)
		codes, _, _ := scriptCodes(string(b))
		for _, c := range codes {
			byScript[c] = true
		}
	}
	var idle []string
	for _, c := range seckill.Codes() {
		name := goName(c)
		if !byScript[string(c)] && !used["Code"+name] && !used["Err"+name] {
			idle = append(idle, string(c))
		}
	}
	sort.Strings(idle)
	if len(idle) > 0 {
		t.Errorf("codes no script or handler produces (Code… or Err… unused outside the table): %v", idle)
	}
}

// goName is the Go name of a code's constant and sentinel: sold_out is
// SoldOut (CodeSoldOut, ErrSoldOut); invalid_request is Invalid.
func goName(c seckill.Code) string {
	if c == seckill.CodeInvalid {
		return "Invalid"
	}
	var b strings.Builder
	for _, w := range strings.Split(string(c), "_") {
		b.WriteString(strings.ToUpper(w[:1]) + w[1:])
	}
	return b.String()
}

// TestCodesDocumented: docs/api.md names every code of the table.
func TestCodesDocumented(t *testing.T) {
	doc, err := os.ReadFile("docs/api.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range seckill.Codes() {
		if !strings.Contains(string(doc), "`"+string(c)+"`") {
			t.Errorf("docs/api.md does not name the code %s", c)
		}
	}
}
