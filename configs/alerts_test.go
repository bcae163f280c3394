package configs_test

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// TestAlertsHaveRunbooksAndTests: every alert names its runbook, a
// section of docs/operating.md that exists, and alerts_test.yml shows it firing
// and silent (promtool runs those in make test).
func TestAlertsHaveRunbooksAndTests(t *testing.T) {
	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert       string            `yaml:"alert"`
				Annotations map[string]string `yaml:"annotations"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	raw, err := os.ReadFile("prometheus/alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(raw, &rules); err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile("../docs/operating.md")
	if err != nil {
		t.Fatal(err)
	}
	anchors := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^#+ (.+)$`).FindAllStringSubmatch(string(readme), -1) {
		anchors[anchor(m[1])] = true
	}
	tests, err := os.ReadFile("prometheus/alerts_test.yml")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			n++
			rb := r.Annotations["runbook"]
			if a, ok := strings.CutPrefix(rb, "docs/operating.md#"); !ok || !anchors[a] {
				t.Errorf("%s: runbook %q is not a section of docs/operating.md", r.Alert, rb)
			}
			if r.Annotations["summary"] == "" {
				t.Errorf("%s: no summary", r.Alert)
			}
			name := regexp.MustCompile(`alertname: ` + r.Alert + `\n\s+exp_alerts:`)
			fires := regexp.MustCompile(`alertname: ` + r.Alert + `\n\s+exp_alerts:\n\s+- exp_labels`)
			silent := regexp.MustCompile(`alertname: ` + r.Alert + `\n\s+exp_alerts: \[\]`)
			if !name.Match(tests) || !fires.Match(tests) || !silent.Match(tests) {
				t.Errorf("%s: alerts_test.yml lacks a case where it fires or one where it stays silent", r.Alert)
			}
		}
	}
	if n < 10 {
		t.Errorf("%d alerts", n)
	}
}

// anchor is GitHub's anchor of a heading: lower case, spaces to hyphens,
// punctuation dropped.
func anchor(h string) string {
	h = strings.ToLower(strings.TrimSpace(h))
	var b strings.Builder
	for _, r := range h {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9':
			b.WriteRune(r)
		}
	}
	return b.String()
}
