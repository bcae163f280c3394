package seckill_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestLayoutMatchesTheTree holds README's layout table and the layers
// table of docs/architecture.md to the packages of the tree: every package
// has a row, and every path a row names exists.
func TestLayoutMatchesTheTree(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", "{{.Dir}}", "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	root, _ := os.Getwd()
	var pkgs []string
	for _, dir := range strings.Fields(string(out)) {
		rel, _ := filepath.Rel(root, dir)
		pkgs = append(pkgs, filepath.ToSlash(rel))
	}
	code := regexp.MustCompile("`([^`]+)`")

	readme := table(t, "README.md", "## Layout")
	var named []string
	for _, row := range readme {
		for _, m := range code.FindAllStringSubmatch(row[0], -1) {
			named = append(named, strings.TrimSuffix(m[1], "/"))
		}
	}
	for _, p := range named {
		if strings.ContainsAny(p, "* ") {
			continue // the root's *.go, package seckill
		}
		if _, err := os.Stat(p); err != nil {
			t.Errorf("README's layout names %s, which does not exist", p)
		}
	}
	for _, p := range pkgs {
		if p == "." {
			continue // the domain: the row of the root's *.go
		}
		covered := false
		for _, n := range named {
			if p == n || strings.HasPrefix(p, n+"/") {
				covered = true
			}
		}
		if !covered {
			t.Errorf("package %s has no row in README's layout", p)
		}
	}

	layers := table(t, "docs/architecture.md", "## Layers")
	var listed []string
	for _, row := range layers {
		for _, m := range code.FindAllStringSubmatch(row[1], -1) {
			listed = append(listed, m[1])
		}
	}
	for _, p := range pkgs {
		if p == "." || strings.HasPrefix(p, "scripts/") {
			continue // the domain is `seckill`; scripts/wrk only embeds a wrk script
		}
		found := false
		for _, l := range listed {
			if p == l || strings.HasPrefix(p, l+"/") {
				found = true
			}
		}
		if !found {
			t.Errorf("package %s is in no layer of docs/architecture.md", p)
		}
	}
}

// table returns the rows (cells trimmed) of the first markdown table
// after heading in file, its header and rule left out.
func table(t *testing.T, file, heading string) [][]string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "\n"+heading+"\n")
	if !ok {
		t.Fatalf("%s has no %q", file, heading)
	}
	var rows [][]string
	started := false
	for _, line := range strings.Split(rest, "\n") {
		if !strings.HasPrefix(line, "|") {
			if started {
				break
			}
			continue
		}
		started = true
		cells := strings.Split(strings.Trim(line, "|"), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		if strings.HasPrefix(cells[0], "---") {
			continue
		}
		rows = append(rows, cells)
	}
	if len(rows) < 2 {
		t.Fatalf("%s: no table after %q", file, heading)
	}
	return rows[1:] // the header
}
