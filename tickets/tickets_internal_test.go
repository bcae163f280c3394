package tickets

import (
	"testing"
	"time"
)

// BenchmarkCheckTicket is what a buy on a sale with require_ticket pays
// to verify its ticket (one HMAC-SHA256, no round trip).
func BenchmarkCheckTicket(b *testing.B) {
	key := Key("bench-secret")
	now := time.Now()
	tk := Mint(key, "01M8QSWSB4ACCXAKAPM45FE4NM", 42, now.Add(time.Minute))
	sg := newSigner(key)
	b.ReportAllocs()
	for b.Loop() {
		if err := sg.check(tk, "01M8QSWSB4ACCXAKAPM45FE4NM", 42, now); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSolves is the server's side of a proof of work: one SHA-256.
func BenchmarkSolves(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		Solves("0123456789abcdef0123456789abcdef", "1234567", 16)
	}
}
