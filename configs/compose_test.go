package configs_test

import (
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// TestComposeStack checks what can be checked of the whole stack without a
// container engine: Debian's docker-compose parses docker-compose.yml, the
// stack has its services (two serve behind one port, a worker, the
// migration once before them, Prometheus, Grafana), each process has a
// healthcheck on /readyz, every file it mounts exists, and the image is
// built by the Makefile's own build step, static, run as non-root.
func TestComposeStack(t *testing.T) {
	bin, err := exec.LookPath("docker-compose")
	if err != nil {
		t.Fatalf("docker-compose not found: apt-get install docker-compose (scripts/services.sh does): %v", err)
	}
	cmd := exec.Command(bin, "-f", "docker-compose.yml", "config")
	cmd.Dir = ".."
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("docker-compose config: %v\n%s", err, out)
	}
	var stack struct {
		Services map[string]struct {
			Command     []string          `yaml:"command"`
			Image       string            `yaml:"image"`
			Volumes     []string          `yaml:"volumes"`
			Environment map[string]string `yaml:"environment"`
			DependsOn   map[string]struct {
				Condition string `yaml:"condition"`
			} `yaml:"depends_on"`
			Healthcheck struct {
				Test []string `yaml:"test"`
			} `yaml:"healthcheck"`
		} `yaml:"services"`
	}
	if err := yaml.Unmarshal(out, &stack); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"redis", "rabbitmq", "mysql", "migrate", "serve-1", "serve-2", "worker", "proxy", "prometheus", "grafana"} {
		if _, ok := stack.Services[name]; !ok {
			t.Errorf("no service %s", name)
		}
	}
	secrets := map[string]string{}
	for name, svc := range stack.Services {
		for _, v := range svc.Volumes {
			src, _, _ := strings.Cut(v, ":")
			if strings.HasPrefix(src, "/") {
				if _, err := os.Stat(src); err != nil {
					t.Errorf("%s mounts %s, which does not exist", name, src)
				}
			}
		}
		if slices.Contains([]string{"serve", "worker"}, strings.Join(svc.Command, " ")) {
			if svc.Image != "seckill:latest" || !slices.Contains(svc.Healthcheck.Test, "ready") {
				t.Errorf("%s: image %q, healthcheck %v", name, svc.Image, svc.Healthcheck.Test)
			}
			if svc.DependsOn["migrate"].Condition != "service_completed_successfully" {
				t.Errorf("%s does not wait for the migration: %v", name, svc.DependsOn)
			}
			secrets[name] = svc.Environment["SECKILL_JWT_SECRET"]
		}
	}
	if s := secrets["serve-1"]; s == "" || s != secrets["serve-2"] || s != secrets["worker"] {
		t.Errorf("the processes do not share one signing secret: %v", secrets)
	}
	for _, upstream := range []string{"server serve-1:8080", "server serve-2:8080"} {
		conf, err := os.ReadFile("nginx/seckill.conf")
		if err != nil || !strings.Contains(string(conf), upstream) {
			t.Errorf("the proxy lacks %q (%v)", upstream, err)
		}
	}

	docker, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	makefile, err := os.ReadFile("../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	for what, re := range map[string]string{
		"builds with the Makefile, static": `(?m)^RUN CGO_ENABLED=0 make build$`,
		"copies the Makefile's binary":     `(?m)^COPY --from=build /src/bin/seckill `,
		"runs as non-root":                 `(?m)^USER nonroot`,
		"on a minimal base":                `(?m)^FROM gcr.io/distroless/static`,
	} {
		if !regexp.MustCompile(re).Match(docker) {
			t.Errorf("Dockerfile: %s (%s)", what, re)
		}
	}
	if !regexp.MustCompile(`(?m)^BIN\s+:= bin/seckill$`).Match(makefile) || !strings.Contains(string(makefile), "$(GO) build -o $(BIN) ./cmd/seckill") {
		t.Error("the Makefile's build step is not the one the Dockerfile runs")
	}
}
