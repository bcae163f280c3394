package web

import (
	"io/fs"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/seckill/seckill"
)

var (
	jsGroup   = regexp.MustCompile(`^export const (\w+) =`)
	jsMember  = regexp.MustCompile(`^\s*(\w+): "([a-z_]+)",`)
	jsLiteral = regexp.MustCompile(`(["'\x60])([a-z_]+)["'\x60]`)
	byCode    = regexp.MustCompile(`\[\s*\w+\.code\s*\]`)
)

// TestPagesNameCodesInOneModule: the outcome codes and the sale states the
// pages act on are named in codes.js only, each code one of the server's
// table (or one of the pages' own, in Local); no other script spells one
// as a string or picks from a table keyed by them, so a renamed code
// cannot be missed in one place of many.
func TestPagesNameCodesInOneModule(t *testing.T) {
	src, err := fs.ReadFile(Static, "codes.js")
	if err != nil {
		t.Fatal(err)
	}
	words := map[string]bool{} // what codes.js names, which no other script may spell
	var group string
	for _, line := range strings.Split(string(src), "\n") {
		if m := jsGroup.FindStringSubmatch(line); m != nil {
			group = m[1]
		}
		m := jsMember.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		words[m[2]] = true
		_, isCode := seckill.ParseCode(m[2])
		switch {
		case group == "Code" && !isCode:
			t.Errorf("codes.js: Code.%s is %q, which the server's table lacks", m[1], m[2])
		case group == "Phase" && !slices.Contains(phases, seckill.Phase(m[2])):
			t.Errorf("codes.js: Phase.%s is %q, not a phase of a sale", m[1], m[2])
		case group == "QueueStatus" && !slices.Contains(queueStatuses, seckill.QueueStatus(m[2])):
			t.Errorf("codes.js: QueueStatus.%s is %q, not a status of a waiting room", m[1], m[2])
		}
	}
	for _, c := range seckill.Codes() {
		words[string(c)] = true // a code the pages do not name yet must not be spelled either
	}
	for _, p := range phases {
		words[string(p)] = true
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
			for _, m := range jsLiteral.FindAllStringSubmatch(line, -1) {
				if words[m[2]] {
					t.Errorf("%s:%d spells %q: name it from codes.js", name, i+1, m[2])
				}
			}
		}
	}
}

// phases are the states of a sale as shoppers see them.
var queueStatuses = []seckill.QueueStatus{seckill.QueueWaiting, seckill.QueueAdmitted, seckill.QueueSoldOut, seckill.QueueNotInQueue}

var phases = []seckill.Phase{seckill.PhaseScheduled, seckill.PhaseActive, seckill.PhasePaused, seckill.PhaseSoldOut, seckill.PhaseEnded}
