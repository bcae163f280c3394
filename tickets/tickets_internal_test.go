package tickets

import (
	"testing"
)

// BenchmarkSolves is the server's side of a proof of work: one SHA-256.
func BenchmarkSolves(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		Solves("0123456789abcdef0123456789abcdef", "1234567", 16)
	}
}
