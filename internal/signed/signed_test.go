package signed_test

import (
	"testing"
	"time"

	"github.com/seckill/seckill/internal/signed"
)

const user = "01M8QSWSB4ACCXAKAPM45FE4NM"

// TestValid: a token serves its user and sale until its expiry, and no
// other user, sale, key, kind or altered copy.
func TestValid(t *testing.T) {
	now := time.Now()
	sg := signed.NewSigner(signed.Kind("kind a").Key("secret"))
	tk := sg.Mint(user, 42, now.Add(time.Minute))
	if !sg.Valid(tk, user, 42, now) {
		t.Fatal("a fresh token is refused")
	}
	other := signed.NewSigner(signed.Kind("kind b").Key("secret")).Mint(user, 42, now.Add(time.Minute))
	for name, c := range map[string]struct {
		tk   string
		user string
		sale int64
		at   time.Time
	}{
		"expired":        {tk, user, 42, now.Add(time.Minute)},
		"another user":   {tk, "01M8QSWSB4ACCXAKAPM45FE4NN", 42, now},
		"another sale":   {tk, user, 43, now},
		"another kind":   {other, user, 42, now},
		"altered expiry": {"9" + tk, user, 42, now},
		"cut":            {tk[:len(tk)-2], user, 42, now},
		"empty":          {"", user, 42, now},
		"no mac":         {"99999999999.", user, 42, now},
	} {
		if sg.Valid(c.tk, c.user, c.sale, c.at) {
			t.Errorf("%s: accepted", name)
		}
	}
}

// BenchmarkValid is what a buy with a ticket or a pass pays to check it
// (one HMAC-SHA256, no round trip).
func BenchmarkValid(b *testing.B) {
	now := time.Now()
	sg := signed.NewSigner(signed.Kind("bench").Key("bench-secret"))
	tk := sg.Mint(user, 42, now.Add(time.Minute))
	b.ReportAllocs()
	for b.Loop() {
		if !sg.Valid(tk, user, 42, now) {
			b.Fatal("refused")
		}
	}
}
