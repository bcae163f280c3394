// Package signed makes and checks the short HMAC tokens that bind a user
// to a sale until an expiry: buy tickets and admission passes. A token is
// "<expiry unix seconds>.<base64url HMAC-SHA256 of sale|user|expiry>",
// checked without a round trip to any store.
package signed

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"hash"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Kind is one kind of token, named by the label its key is derived with
// (package tickets' buy tickets, package room's admission passes).
type Kind string

// Key derives the kind's key from the deployment's session secret, so a
// deployment has one secret to keep and rotate, and a token of one kind is
// never good as another.
func (k Kind) Key(secret string) []byte {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(k))
	return m.Sum(nil)
}

// Mint returns a token of user for sale that serves until exp, signed
// with key: for the tools and tests that mint tokens offline.
func Mint(key []byte, user string, sale int64, exp time.Time) string {
	return NewSigner(key).Mint(user, sale, exp)
}

// MaxLen bounds a token as a request field may carry it (one is about 55
// characters).
const MaxLen = 128

// Signer signs and checks tokens with one key, reusing its HMAC states: a
// buy checks one, and a fresh HMAC costs more than the check itself.
type Signer struct{ pool sync.Pool }

// macState is one HMAC with a buffer for its message, which would escape
// to the heap on every call if it lived on the stack.
type macState struct {
	h   hash.Hash
	buf [128]byte
}

// NewSigner returns a signer with key.
func NewSigner(key []byte) *Signer {
	sg := &Signer{}
	sg.pool.New = func() any { return &macState{h: hmac.New(sha256.New, key)} }
	return sg
}

// Mint returns a token of user for sale that serves until exp.
func (sg *Signer) Mint(user string, sale int64, exp time.Time) string {
	e := strconv.FormatInt(exp.Unix(), 10)
	return e + "." + base64.RawURLEncoding.EncodeToString(sg.mac(nil, user, sale, e))
}

// mac appends the HMAC of "sale|user|exp" to dst; user ids hold no '|'.
func (sg *Signer) mac(dst []byte, user string, sale int64, exp string) []byte {
	m := sg.pool.Get().(*macState)
	b := strconv.AppendInt(m.buf[:0], sale, 10)
	b = append(b, '|')
	b = append(b, user...)
	b = append(b, '|')
	b = append(b, exp...)
	m.h.Reset()
	m.h.Write(b)
	dst = m.h.Sum(dst)
	sg.pool.Put(m)
	return dst
}

// Valid says whether t is a token of user for sale that still serves at
// now.
func (sg *Signer) Valid(t, user string, sale int64, now time.Time) bool {
	e, mac, ok := strings.Cut(t, ".")
	if !ok || base64.RawURLEncoding.DecodedLen(len(mac)) != sha256.Size {
		return false
	}
	exp, err := strconv.ParseInt(e, 10, 64)
	if err != nil || now.Unix() >= exp {
		return false
	}
	var got, want [sha256.Size]byte
	_, err = base64.RawURLEncoding.AppendDecode(got[:0], []byte(mac))
	return err == nil && hmac.Equal(got[:], sg.mac(want[:0], user, sale, e))
}
