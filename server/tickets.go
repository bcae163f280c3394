package server

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"hash"
	"math/bits"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/inventory"
)

// Buy tickets and proofs of work (API.md, buy tickets). A sale with
// require_ticket takes buys only with a ticket: an HMAC over the sale, the
// user and an expiry, handed out once the sale is open, checked on each buy
// without a round trip. A sale with a pow_difficulty hands a ticket out only
// for a solved challenge: random, bound to user and sale, kept in Redis
// until it is used once or expires.

var (
	errTicketRequired = errors.New("ticket required")
	errTicketInvalid  = errors.New("ticket invalid")
	errPowInvalid     = errors.New("proof of work invalid")
)

// TicketKey derives the key that signs buy tickets from the session
// secret, so a deployment has one secret to keep and rotate.
func TicketKey(jwtSecret string) []byte {
	m := hmac.New(sha256.New, []byte(jwtSecret))
	m.Write([]byte("seckill buy tickets v1"))
	return m.Sum(nil)
}

// MintTicket returns a buy ticket of user for sale that serves until exp:
// "<exp unix seconds>.<base64url HMAC>".
func MintTicket(key []byte, user string, sale int64, exp time.Time) string {
	return newSigner(key).mint(user, sale, exp)
}

// signer signs and checks tickets with one key, reusing its HMAC states:
// a buy on a sale with tickets checks one, and a fresh HMAC costs more
// than the check itself.
type signer struct{ pool sync.Pool }

// macState is one HMAC with a buffer for its message, which would escape
// to the heap on every call if it lived on the stack.
type macState struct {
	h   hash.Hash
	buf [128]byte
}

func newSigner(key []byte) *signer {
	sg := &signer{}
	sg.pool.New = func() any { return &macState{h: hmac.New(sha256.New, key)} }
	return sg
}

func (sg *signer) mint(user string, sale int64, exp time.Time) string {
	e := strconv.FormatInt(exp.Unix(), 10)
	return e + "." + base64.RawURLEncoding.EncodeToString(sg.mac(nil, user, sale, e))
}

// mac appends the HMAC of "sale|user|exp" to dst; user ids hold no '|'.
func (sg *signer) mac(dst []byte, user string, sale int64, exp string) []byte {
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

// check says whether t is a ticket of user for sale that still serves at
// now.
func (sg *signer) check(t, user string, sale int64, now time.Time) error {
	e, mac, ok := strings.Cut(t, ".")
	if !ok || base64.RawURLEncoding.DecodedLen(len(mac)) != sha256.Size {
		return errTicketInvalid
	}
	exp, err := strconv.ParseInt(e, 10, 64)
	if err != nil || now.Unix() >= exp {
		return errTicketInvalid
	}
	var got, want [sha256.Size]byte
	if _, err := base64.RawURLEncoding.AppendDecode(got[:0], []byte(mac)); err != nil ||
		!hmac.Equal(got[:], sg.mac(want[:0], user, sale, e)) {
		return errTicketInvalid
	}
	return nil
}

// maxTicketLen bounds the ticket field of a buy body (a ticket is about 55
// characters).
const maxTicketLen = 128

// checkBuyTicket lets a buy through when its sale needs no ticket or its
// ticket is good. A sale unknown to Redis is left to the buy script, which
// answers sale_not_found.
func (s *Server) checkBuyTicket(ctx context.Context, sale int64, user, ticket string) error {
	st, err := s.rules.get(ctx, sale)
	switch {
	case errors.Is(err, inventory.ErrSaleNotFound):
		return nil // not cached: the sale may be created the next moment
	case err != nil:
		return unavailable(err)
	case !st.RequireTicket:
		return nil
	case ticket == "":
		return errTicketRequired
	}
	return s.tickets.check(ticket, user, sale, s.now())
}

// openSale reads the stock of the request's sale; unless the sale is open
// now (active, or sold out: a ticket may still meet returned stock), it
// answers the refusal and returns false.
func (s *Server) openSale(c *gin.Context) (int64, inventory.Stock, bool) {
	id, err := saleID(c)
	if err != nil {
		abort(c, err)
		return 0, inventory.Stock{}, false
	}
	st, err := s.inv.Stock(c.Request.Context(), id)
	if err == nil {
		switch st.StatusAt(s.now()) {
		case "scheduled":
			err = inventory.ErrNotStarted
		case "ended":
			err = inventory.ErrEnded
		case "paused":
			err = inventory.ErrPaused
		}
	}
	if err != nil {
		abort(c, classify(err))
		return 0, st, false
	}
	return id, st, true
}

type challengeJSON struct {
	Challenge  string    `json:"challenge"`
	Difficulty int       `json:"difficulty"`
	ExpiresAt  time.Time `json:"expires_at"`
}

// challenge hands out a proof-of-work challenge for an open sale that asks
// for one: 16 random bytes in hex, stored under the sale and the user with
// its difficulty until it is used or expires. A user has one challenge a
// sale: a new one replaces the last, so a script asking for many keeps no
// more in Redis than a person does.
func (s *Server) challenge(c *gin.Context) {
	id, st, ok := s.openSale(c)
	if !ok {
		return
	}
	ctx := c.Request.Context()
	if st.PowDifficulty == 0 {
		abort(c, newError(http.StatusNotFound, "not_found", "This sale asks for no proof of work: POST /api/sales/%d/ticket with {}.", id))
		return
	}
	var raw [challengeLen / 2]byte
	_, _ = rand.Read(raw[:]) // never fails (crypto/rand)
	ch := hex.EncodeToString(raw[:])
	exp := s.now().Add(s.cfg.TicketTTL)
	val := ch + "|" + strconv.Itoa(st.PowDifficulty)
	if err := s.rdb.Set(ctx, s.inv.Keys().Challenge(id, currentUser(c).ID), val, s.cfg.TicketTTL).Err(); err != nil {
		abort(c, unavailable(err))
		return
	}
	s.outcomes.add(id, "challenge_issued")
	c.JSON(http.StatusOK, challengeJSON{Challenge: ch, Difficulty: st.PowDifficulty, ExpiresAt: exp.UTC()})
}

type ticketRequest struct {
	Challenge *string `json:"challenge"`
	Nonce     *string `json:"nonce"`
}

type ticketJSON struct {
	Ticket    string    `json:"ticket"`
	ExpiresAt time.Time `json:"expires_at"`
}

// ticket hands out a buy ticket for an open sale, for a solved challenge
// when the sale asks for a proof of work.
func (s *Server) ticket(c *gin.Context) {
	id, st, ok := s.openSale(c)
	if !ok {
		return
	}
	var req ticketRequest
	if err := decode(c, &req); err != nil {
		abort(c, err)
		return
	}
	ctx := c.Request.Context()
	u := currentUser(c)
	if st.PowDifficulty > 0 {
		ch, nonce := "", ""
		if req.Challenge != nil && req.Nonce != nil {
			ch, nonce = *req.Challenge, *req.Nonce
		}
		if err := s.redeem(ctx, id, u.ID, ch, nonce); err != nil {
			if errors.Is(err, errPowInvalid) {
				s.outcomes.add(id, "pow_invalid")
			}
			abort(c, err)
			return
		}
		s.outcomes.add(id, "challenge_solved")
	}
	exp := s.now().Add(s.cfg.TicketTTL)
	s.outcomes.add(id, "ticket_issued")
	c.JSON(http.StatusOK, ticketJSON{Ticket: s.tickets.mint(u.ID, id, exp), ExpiresAt: exp.UTC().Truncate(time.Second)})
}

// Bounds of a solution's strings: a challenge is 32 hex digits, a nonce
// whatever the solver counts in, printable ASCII.
const (
	challengeLen = 32
	maxNonceLen  = 64
)

// redeem uses up user's challenge of sale, if it is ch and nonce solves
// it. The challenge is taken (GETDEL) before anything is checked: a wrong
// answer costs the solver a new challenge, so one cannot be guessed at.
func (s *Server) redeem(ctx context.Context, sale int64, user, ch, nonce string) error {
	if len(ch) != challengeLen || strings.Trim(ch, "0123456789abcdef") != "" || !printable(nonce, maxNonceLen) {
		return errPowInvalid
	}
	val, err := s.rdb.GetDel(ctx, s.inv.Keys().Challenge(sale, user)).Result()
	if errors.Is(err, redis.Nil) {
		return errPowInvalid // expired, used, or never issued
	}
	if err != nil {
		return unavailable(err)
	}
	issued, n, _ := strings.Cut(val, "|")
	difficulty, _ := strconv.Atoi(n)
	if issued != ch || !Solves(ch, nonce, difficulty) {
		return errPowInvalid
	}
	return nil
}

// Solves says whether SHA-256(challenge + ":" + nonce) starts with at
// least difficulty zero bits.
func Solves(challenge, nonce string, difficulty int) bool {
	sum := sha256.Sum256([]byte(challenge + ":" + nonce))
	zeros := 0
	for _, b := range sum {
		if b != 0 {
			zeros += bits.LeadingZeros8(b)
			break
		}
		zeros += 8
	}
	return zeros >= difficulty
}

// printable says whether s is 1 to max characters of printable ASCII.
func printable(s string, max int) bool {
	if len(s) == 0 || len(s) > max {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}
