package identity

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"runtime"
	"strings"

	"golang.org/x/crypto/argon2"

	"github.com/seckill/seckill"
)

// Argon2 are argon2id's parameters: memory in KiB, passes, lanes.
type Argon2 struct {
	Memory  uint32
	Time    uint32
	Threads uint8
}

// OWASP is the least OWASP's password storage cheat sheet recommends for
// argon2id: 19 MiB, 2 passes, 1 lane. About 40 ms of one core here.
var OWASP = Argon2{Memory: 19 * 1024, Time: 2, Threads: 1}

const (
	saltLen = 16
	hashLen = 32
)

// Hash returns password's argon2id hash with a new random salt, in the PHC
// string format: $argon2id$v=19$m=19456,t=2,p=1$<salt>$<hash>.
func (p Argon2) Hash(password string) string {
	salt := make([]byte, saltLen)
	rand.Read(salt)
	sum := argon2.IDKey([]byte(password), salt, p.Time, p.Memory, p.Threads, hashLen)
	b64 := base64.RawStdEncoding
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s", argon2.Version, p.Memory, p.Time, p.Threads,
		b64.EncodeToString(salt), b64.EncodeToString(sum))
}

var errHashFormat = errors.New("identity: not an argon2id hash")

// CheckPassword reports whether password has the argon2id hash encoded
// (with the parameters written in it), in constant time.
func CheckPassword(encoded, password string) (bool, error) {
	f := strings.Split(encoded, "$")
	if len(f) != 6 || f[0] != "" || f[1] != "argon2id" || f[2] != fmt.Sprintf("v=%d", argon2.Version) {
		return false, errHashFormat
	}
	var p Argon2
	if _, err := fmt.Sscanf(f[3], "m=%d,t=%d,p=%d", &p.Memory, &p.Time, &p.Threads); err != nil || p.Time == 0 || p.Threads == 0 {
		return false, errHashFormat
	}
	salt, err1 := base64.RawStdEncoding.DecodeString(f[4])
	want, err2 := base64.RawStdEncoding.DecodeString(f[5])
	if err1 != nil || err2 != nil || len(want) == 0 {
		return false, errHashFormat
	}
	got := argon2.IDKey([]byte(password), salt, p.Time, p.Memory, p.Threads, uint32(len(want)))
	return subtle.ConstantTimeCompare(got, want) == 1, nil
}

// hashing bounds the password hashes this process computes at once (each
// takes Argon2.Memory and a core for tens of milliseconds), shoppers' and
// merchants' alike: a burst of sign-ins waits its turn instead of
// exhausting memory.
var hashing = make(chan struct{}, runtime.GOMAXPROCS(0))

func hashTurn(ctx context.Context) error {
	select {
	case hashing <- struct{}{}:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("identity: %w: %w", seckill.ErrClientCancelled, ctx.Err())
	}
}

// HashPassword is p.Hash in its turn.
func HashPassword(ctx context.Context, p Argon2, password string) (string, error) {
	if err := hashTurn(ctx); err != nil {
		return "", err
	}
	defer func() { <-hashing }()
	return p.Hash(password), nil
}

// VerifyPassword is CheckPassword in its turn.
func VerifyPassword(ctx context.Context, encoded, password string) (bool, error) {
	if err := hashTurn(ctx); err != nil {
		return false, err
	}
	defer func() { <-hashing }()
	return CheckPassword(encoded, password)
}

// Passwords checks sign-ins against the stored hashes. For a name nobody
// has it checks a decoy hash instead, so an unknown name costs what a
// wrong password does: timing tells a guesser nothing. Shoppers' accounts
// and merchants sign in through it alike.
type Passwords struct{ decoy string }

// NewPasswords makes the decoy with p's parameters, as a real hash has
// them.
func NewPasswords(p Argon2) Passwords { return Passwords{decoy: p.Hash(randomToken())} }

// Match reports whether password is the one hash holds, in its turn;
// found false (no such name) checks the decoy and answers false.
func (p Passwords) Match(ctx context.Context, found bool, hash, password string) (bool, error) {
	if !found {
		hash = p.decoy
	}
	ok, err := VerifyPassword(ctx, hash, password)
	return ok && found, err
}
