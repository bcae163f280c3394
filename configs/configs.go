// Package configs holds Seckill's default configuration (seckill.yaml) and
// loads the effective configuration: defaults, then an optional file named by
// SECKILL_CONFIG, then SECKILL_* environment variables.
package configs

import (
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"reflect"
	"sort"
	"strings"

	"github.com/knadh/koanf/parsers/yaml"
	"github.com/knadh/koanf/providers/env/v2"
	"github.com/knadh/koanf/providers/rawbytes"
	"github.com/knadh/koanf/v2"
)

//go:embed seckill.yaml
var defaults []byte

// EnvPrefix starts every environment variable that overrides a setting.
const EnvPrefix = "SECKILL_"

// Config is the effective configuration of one Seckill process, in
// sections, one for each part of the system. Every section is squashed: its
// settings keep their flat keys (redis_addr, SECKILL_REDIS_ADDR), which are
// the operators' contract.
type Config struct {
	Process  Process  `koanf:",squash"`
	HTTP     HTTP     `koanf:",squash"`
	Redis    Redis    `koanf:",squash"`
	AMQP     AMQP     `koanf:",squash"`
	MySQL    MySQL    `koanf:",squash"`
	Sessions Sessions `koanf:",squash"`
	Identity Identity `koanf:",squash"`
	Buy      Buy      `koanf:",squash"`
	Orders   Orders   `koanf:",squash"`
	Tracing  Tracing  `koanf:",squash"`
	Funds    Funds    `koanf:",squash"`
}

// Production reports whether the process runs with production settings.
func (c Config) Production() bool { return c.Process.Production() }

// Load builds the effective configuration from the embedded defaults, the
// file named by SECKILL_CONFIG (if any) and the environment given as
// KEY=value pairs (os.Environ() in main, a fixed list in tests).
func Load(environ []string) (Config, error) {
	k := koanf.New(".")
	if err := k.Load(rawbytes.Provider(defaults), yaml.Parser()); err != nil {
		return Config{}, fmt.Errorf("config: embedded defaults: %w", err)
	}
	known := map[string]bool{}
	for _, key := range k.Keys() {
		known[key] = true
	}

	vars := map[string]string{}
	for _, kv := range environ {
		name, value, ok := strings.Cut(kv, "=")
		// SECKILL_TEST_* variables belong to the test suite, not to a setting.
		if ok && strings.HasPrefix(name, EnvPrefix) && !strings.HasPrefix(name, EnvPrefix+"TEST_") {
			vars[name] = value
		}
	}
	if path := vars[EnvPrefix+"CONFIG"]; path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return Config{}, fmt.Errorf("config: SECKILL_CONFIG: %w", err)
		}
		if err := k.Load(rawbytes.Provider(b), yaml.Parser()); err != nil {
			return Config{}, fmt.Errorf("config: SECKILL_CONFIG %s: %w", path, err)
		}
		for _, key := range k.Keys() {
			if !known[key] {
				return Config{}, fmt.Errorf("config: %s: unknown setting %q", path, key)
			}
		}
	}

	var unknown []string
	err := k.Load(env.Provider(".", env.Opt{
		Prefix:      EnvPrefix,
		EnvironFunc: func() []string { return environ },
		TransformFunc: func(name, value string) (string, any) {
			key := strings.ToLower(strings.TrimPrefix(name, EnvPrefix))
			// SECKILL_TEST_* variables belong to the test suite, not to a setting.
			if key == "config" || strings.HasPrefix(key, "test_") {
				return "", nil
			}
			if !known[key] {
				unknown = append(unknown, name)
				return "", nil
			}
			return key, value
		},
	}), nil)
	if err != nil {
		return Config{}, fmt.Errorf("config: environment: %w", err)
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return Config{}, fmt.Errorf("config: unknown setting %s", strings.Join(unknown, ", "))
	}

	c, err := decode(k)
	if err != nil {
		return Config{}, err
	}
	if err := c.complete(); err != nil {
		return Config{}, err
	}
	return c, nil
}

// decode reads the loaded settings into a Config.
func decode(k *koanf.Koanf) (Config, error) {
	var c Config
	if err := k.UnmarshalWithConf("", &c, koanf.UnmarshalConf{Tag: "koanf"}); err != nil {
		return Config{}, fmt.Errorf("config: %w", err)
	}
	return c, nil
}

// complete has each section check its settings (filling the defaults that
// follow from others) and makes up the development secrets.
func (c *Config) complete() error {
	prod := c.Production()
	err := errors.Join(
		c.Process.check(),
		c.HTTP.check(),
		c.Redis.check(),
		c.AMQP.check(),
		c.MySQL.check(),
		c.Sessions.check(prod),
		c.Identity.check(prod, c.HTTP.Addr),
		c.Buy.check(),
		c.Orders.check(),
		c.Funds.check(prod),
	)
	if err != nil {
		return err
	}
	if c.Sessions.JWTSecret == "" {
		c.Sessions.JWTSecret = randomHex(32)
	}
	if c.Sessions.AdminPassword == "" {
		c.Sessions.AdminPassword = randomHex(8)
		c.Sessions.GeneratedAdminPassword = true
	}
	if c.Funds.Provider == ProviderTest && c.Funds.StripeWebhookSecret == "" {
		// The test provider signs its webhooks as Stripe does, with a
		// secret of this start.
		c.Funds.StripeWebhookSecret = "whsec_" + randomHex(24)
	}
	return nil
}

// SplitList splits a comma-separated setting, dropping blanks.
func SplitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// LogValue lets slog print the configuration with its secrets masked, each
// setting under its key as in seckill.yaml.
func (c Config) LogValue() slog.Value {
	return slog.GroupValue(settingAttrs(reflect.ValueOf(c), nil)...)
}

// settingAttrs appends the settings of the struct v, walking into the
// squashed sections, with the values of secret:"..." fields masked.
func settingAttrs(v reflect.Value, attrs []slog.Attr) []slog.Attr {
	t := v.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		key, opts, _ := strings.Cut(f.Tag.Get("koanf"), ",")
		if opts == "squash" && f.Type.Kind() == reflect.Struct {
			attrs = settingAttrs(v.Field(i), attrs)
			continue
		}
		if key == "" || key == "-" {
			continue
		}
		val := fmt.Sprint(v.Field(i).Interface())
		switch f.Tag.Get("secret") {
		case "true":
			if val != "" {
				val = "***"
			}
		case "url", "dsn":
			val = MaskCredentials(val)
		}
		attrs = append(attrs, slog.String(key, val))
	}
	return attrs
}

// MaskCredentials hides the password in "scheme://user:pass@host" and
// "user:pass@tcp(host)" forms, and in each of a comma-separated list of
// URLs.
func MaskCredentials(s string) string {
	if strings.Contains(s, "://") && strings.Contains(s, ",") {
		parts := strings.Split(s, ",")
		for i, p := range parts {
			parts[i] = MaskCredentials(p)
		}
		return strings.Join(parts, ",")
	}
	at := strings.LastIndex(s, "@")
	if at < 0 {
		return s
	}
	start := strings.Index(s, "://")
	if start < 0 {
		start = 0
	} else {
		start += 3
	}
	user, _, hasPass := strings.Cut(s[start:at], ":")
	if !hasPass {
		return s
	}
	return s[:start] + user + ":***" + s[at:]
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
