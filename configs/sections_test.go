package configs

import (
	"go/ast"
	"go/parser"
	"go/token"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/knadh/koanf/parsers/yaml"
	"github.com/knadh/koanf/providers/rawbytes"
	"github.com/knadh/koanf/v2"
)

// setting is one leaf field of Config and the key it is read from.
type setting struct {
	key   string
	index []int // for reflect.Value.FieldByIndex
	typ   reflect.Type
}

// settingsOf lists the settings of the struct type t, walking into squashed
// sections as the decoder does.
func settingsOf(t *testing.T, typ reflect.Type) []setting {
	t.Helper()
	var out []setting
	for i := range typ.NumField() {
		f := typ.Field(i)
		key, opts, _ := strings.Cut(f.Tag.Get("koanf"), ",")
		switch {
		case opts == "squash":
			for _, s := range settingsOf(t, f.Type) {
				s.index = append([]int{i}, s.index...)
				out = append(out, s)
			}
		case key == "-":
		case key == "":
			t.Errorf("%s.%s has no koanf key", typ.Name(), f.Name)
		default:
			out = append(out, setting{key: key, index: []int{i}, typ: f.Type})
		}
	}
	return out
}

func keysOf(t *testing.T, typ reflect.Type) []string {
	t.Helper()
	var keys []string
	for _, s := range settingsOf(t, typ) {
		keys = append(keys, s.key)
	}
	return keys
}

func loadDefaults(t *testing.T) *koanf.Koanf {
	t.Helper()
	k := koanf.New(".")
	if err := k.Load(rawbytes.Provider(defaults), yaml.Parser()); err != nil {
		t.Fatal(err)
	}
	return k
}

// TestEverySettingHasAField: the keys of seckill.yaml (which are the only
// ones Load accepts) are exactly the keys of Config's fields, each once.
func TestEverySettingHasAField(t *testing.T) {
	fields := keysOf(t, reflect.TypeFor[Config]())
	yamlKeys := loadDefaults(t).Keys()
	seen := map[string]bool{}
	for _, k := range fields {
		if seen[k] {
			t.Errorf("two fields read %s", k)
		}
		seen[k] = true
		if !slices.Contains(yamlKeys, k) {
			t.Errorf("field for %s, which seckill.yaml lacks", k)
		}
	}
	for _, k := range yamlKeys {
		if !seen[k] {
			t.Errorf("seckill.yaml sets %s, which no field reads", k)
		}
	}
}

// TestDecodeFillsEverySection: with every setting given a value that is not
// its type's zero, decoding leaves no field of any section zero, so each
// squashed section is reached (mapstructure honours ,squash on a named
// field, not only on an embedded one).
func TestDecodeFillsEverySection(t *testing.T) {
	k := loadDefaults(t)
	settings := settingsOf(t, reflect.TypeFor[Config]())
	for _, s := range settings {
		var v any
		switch {
		case s.typ == reflect.TypeFor[time.Duration]():
			v = "7s"
		case s.typ.Kind() == reflect.String:
			v = "seven"
		case s.typ.Kind() == reflect.Bool:
			v = true
		case s.typ.Kind() == reflect.Int, s.typ.Kind() == reflect.Int64:
			v = 7
		case s.typ.Kind() == reflect.Float64:
			v = 7.5
		default:
			t.Fatalf("%s: no test value for %s", s.key, s.typ)
		}
		if err := k.Set(s.key, v); err != nil {
			t.Fatal(err)
		}
	}
	c, err := decode(k)
	if err != nil {
		t.Fatal(err)
	}
	v := reflect.ValueOf(c)
	for _, s := range settings {
		if v.FieldByIndex(s.index).IsZero() {
			t.Errorf("%s did not reach its field", s.key)
		}
	}
	if c.Redis.Addr != "seven" || c.Orders.WorkerBatch != 7 || c.Sessions.TTL != 7*time.Second {
		t.Errorf("decoded %+v", c)
	}
}

// sections maps each section type's name to its type; a section missing
// here fails TestSectionsListed.
var sections = map[string]reflect.Type{
	"Process": reflect.TypeFor[Process](), "HTTP": reflect.TypeFor[HTTP](), "Redis": reflect.TypeFor[Redis](),
	"AMQP": reflect.TypeFor[AMQP](), "MySQL": reflect.TypeFor[MySQL](), "Sessions": reflect.TypeFor[Sessions](),
	"Identity": reflect.TypeFor[Identity](), "Buy": reflect.TypeFor[Buy](), "Orders": reflect.TypeFor[Orders](),
	"Tracing": reflect.TypeFor[Tracing](), "Funds": reflect.TypeFor[Funds](),
}

func TestSectionsListed(t *testing.T) {
	c := reflect.TypeFor[Config]()
	for i := range c.NumField() {
		if f := c.Field(i); sections[f.Type.Name()] != f.Type {
			t.Errorf("Config.%s (%s) is not in the test's sections", f.Name, f.Type)
		}
	}
}

// TestChecksNameTheirOwnSettings reads sections.go: every setting a
// section's check reports (problems.add, checkHostPort) is one of that
// section's own keys, so its SECKILL_ variable exists. It covers the
// branches the settings below never reach.
func TestChecksNameTheirOwnSettings(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "sections.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	checked := map[string]int{}
	for _, d := range f.Decls {
		fn, ok := d.(*ast.FuncDecl)
		if !ok || fn.Recv == nil || fn.Name.Name != "check" {
			continue
		}
		recv := fn.Recv.List[0].Type
		if star, ok := recv.(*ast.StarExpr); ok {
			recv = star.X
		}
		name := recv.(*ast.Ident).Name
		typ, ok := sections[name]
		if !ok {
			t.Errorf("check on %s, which is not a section", name)
			continue
		}
		own := keysOf(t, typ)
		ast.Inspect(fn.Body, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) == 0 {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || (sel.Sel.Name != "add" && sel.Sel.Name != "checkHostPort") {
				return true
			}
			lit, ok := call.Args[0].(*ast.BasicLit)
			if !ok {
				return true // a table's setting: TestCheckMessagesNameKnownVariables covers it
			}
			key, _ := strconv.Unquote(lit.Value)
			checked[name]++
			if !slices.Contains(own, key) {
				t.Errorf("%s.check reports %s, not one of its settings %v", name, key, own)
			}
			return true
		})
	}
	for name := range sections {
		if checked[name] == 0 && name != "Tracing" {
			t.Errorf("%s.check reports no setting", name)
		}
	}
}

// TestCheckMessagesNameKnownVariables: the messages each check gives for
// wrong settings name only SECKILL_ variables of its own section.
func TestCheckMessagesNameKnownVariables(t *testing.T) {
	tests := []struct {
		section string
		check   func() error
	}{
		{"Process", Process{}.check},
		{"HTTP", HTTP{PublicOrigins: "ftp://x", TrustedProxies: "nowhere", OpsAddr: "x", WSMaxPerIP: -1}.check},
		{"Redis", Redis{}.check},
		{"Redis", Redis{Addr: "a:1,b", Sentinels: "s", DB: 16, WaitReplicas: -1}.check},
		{"Redis", Redis{Addr: "a:1,b:2", DB: 3}.check},
		{"AMQP", AMQP{}.check},
		{"AMQP", AMQP{URL: "http://x"}.check},
		{"MySQL", MySQL{}.check},
		{"Sessions", func() error { return Sessions{}.check(true) }},
		{"Identity", func() error { return (&Identity{}).check(true, "") }},
		{"Identity", func() error {
			return (&Identity{Sources: "oidc,accounts,facebook", PublicURL: "ftp://x", SMTPAddr: "x", RateSigninPerIP: -1}).check(true, "")
		}},
		{"Identity", func() error { return (&Identity{Sources: "accounts"}).check(true, "") }},
		{"Buy", Buy{RateGlobal: -1, RatePerUser: -1, RatePerIP: -1, SoldOutRecheck: -1}.check},
		{"Orders", Orders{}.check},
		{"Orders", Orders{RelayPack: 1, WorkerPrefetch: 1, WorkerBatch: 500, RelayBatch: 1, WorkerMetricsAddr: "x"}.check},
	}
	yamlKeys := loadDefaults(t).Keys()
	variable := regexp.MustCompile(EnvPrefix + `[A-Z0-9_]+`)
	for _, tc := range tests {
		err := tc.check()
		if err == nil {
			t.Errorf("%s: no error", tc.section)
			continue
		}
		own := keysOf(t, sections[tc.section])
		for _, line := range strings.Split(err.Error(), "\n") {
			names := variable.FindAllString(line, -1)
			if !strings.HasPrefix(line, "config: "+EnvPrefix) || len(names) == 0 {
				t.Errorf("%s: %q does not start by naming its variable", tc.section, line)
			}
			for _, v := range names {
				key := strings.ToLower(strings.TrimPrefix(v, EnvPrefix))
				if !slices.Contains(yamlKeys, key) {
					t.Errorf("%s: %q names %s, which is no setting", tc.section, line, v)
				} else if !slices.Contains(own, key) {
					t.Errorf("%s: %q names %s, a setting of another section", tc.section, line, v)
				}
			}
		}
	}
}
