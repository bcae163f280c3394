package web

import (
	"io/fs"
	"regexp"
	"strings"
	"testing"

	"github.com/seckill/seckill"
)

var (
	jsMember  = regexp.MustCompile(`^\s*(\w+): "([a-z_]+)",`)
	jsLiteral = regexp.MustCompile(`"([a-z_]+)"`)
	byCode    = regexp.MustCompile(`\[\s*\w+\.code\s*\]`)
)

// TestPagesNameCodesInOneModule: the pages' outcome codes are named in
// codes.js only, each a code of the server's table (or one of the pages'
// own, in Local); no other script compares a code with a literal or picks
// from a table keyed by codes' strings, so a renamed code cannot be missed
// in one place of many.
func TestPagesNameCodesInOneModule(t *testing.T) {
	src, err := fs.ReadFile(Static, "codes.js")
	if err != nil {
		t.Fatal(err)
	}
	local := false
	named := 0
	for _, line := range strings.Split(string(src), "\n") {
		if strings.HasPrefix(line, "export const Local") {
			local = true
		}
		m := jsMember.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		named++
		if _, ok := seckill.ParseCode(m[2]); !ok && !local {
			t.Errorf("codes.js: Code.%s is %q, which the server's table lacks", m[1], m[2])
		}
	}
	if named == 0 {
		t.Fatal("codes.js names no code")
	}
	scripts, err := fs.Glob(Static, "*.js")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range scripts {
		if name == "codes.js" {
			continue
		}
		src, err := fs.ReadFile(Static, name)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(src), "\n") {
			if byCode.MatchString(line) {
				t.Errorf("%s:%d picks by a code from a table of literals: %s", name, i+1, strings.TrimSpace(line))
			}
			if !regexp.MustCompile(`\bcode\b`).MatchString(line) {
				continue
			}
			for _, m := range jsLiteral.FindAllStringSubmatch(line, -1) {
				if _, ok := seckill.ParseCode(m[1]); ok || m[1] == "network" || m[1] == "pow" {
					t.Errorf("%s:%d spells the code %q: name it from codes.js", name, i+1, m[1])
				}
			}
		}
	}
}
