// Package tickets is the bot defence of a sale (API.md, buy tickets). A
// sale with require_ticket takes buys only with a ticket: an HMAC over the
// sale, the user and an expiry, handed out once the sale is open, checked
// on each buy without a round trip (as is a waiting room's admission
// pass, package room). A sale with a pow_difficulty hands a
// ticket out only for a solved challenge: random, bound to user and sale,
// kept in Redis until it is used once or expires.
package tickets

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math/bits"
	"strings"
	"time"

	"github.com/seckill/seckill"
	"github.com/seckill/seckill/internal/signed"
)

// Tickets are the buy tickets' kind of token: Tickets.Key(secret) signs
// them.
const Tickets signed.Kind = "seckill buy tickets v1"

// MaxLen bounds the ticket and pass fields of a buy body.
const MaxLen = signed.MaxLen

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

// Sales is what the service reads of a sale (sales.Service).
type Sales interface {
	// Rules is the sale's stock as of at most a second ago, for its
	// bot-defence settings on the buy path.
	Rules(ctx context.Context, sale int64) (seckill.Stock, error)
	// Stock is the sale's stock now.
	Stock(ctx context.Context, sale int64) (seckill.Stock, error)
}

// Challenges keeps the users' proof-of-work challenges (inventory.Store).
type Challenges interface {
	PutChallenge(ctx context.Context, sale int64, user, ch string, difficulty int, ttl time.Duration) error
	TakeChallenge(ctx context.Context, sale int64, user string) (ch string, difficulty int, ok bool, err error)
}

// Service hands out challenges and tickets, and checks the tickets and
// admission passes of buys.
type Service struct {
	sales      Sales
	challenges Challenges
	signer     *signed.Signer
	// passes checks the admission passes of sales with a waiting room
	// (package room signs them).
	passes *signed.Signer
	ttl    time.Duration
	now    func() time.Time
}

// New returns a service signing tickets with key (see Key) and checking
// admission passes with passKey (room.Passes.Key); tickets and challenges last
// ttl.
func New(sales Sales, challenges Challenges, key, passKey []byte, ttl time.Duration, now func() time.Time) *Service {
	return &Service{sales: sales, challenges: challenges, signer: signed.NewSigner(key), passes: signed.NewSigner(passKey),
		ttl: ttl, now: now}
}

// CheckBuy lets a buy through when its sale's rules allow it: a verified
// buyer on a verified_only sale (seckill.ErrNotEligible otherwise), a good
// admission pass on a sale with a waiting room (seckill.ErrPassRequired or
// ErrPassInvalid), a good ticket on a sale that requires one
// (seckill.ErrTicketRequired or ErrTicketInvalid). None needs a round
// trip: the rules are a second old at most. A sale unknown to Redis is
// left to the buy itself, which answers sale_not_found.
func (s *Service) CheckBuy(ctx context.Context, sale int64, b seckill.Buy) error {
	st, err := s.sales.Rules(ctx, sale)
	switch {
	case errors.Is(err, seckill.ErrSaleNotFound):
		return nil // not cached: the sale may be created the next moment
	case err != nil:
		return unavailable(err)
	case st.VerifiedOnly && !b.Verified:
		return seckill.ErrNotEligible
	}
	if st.WaitingRoom {
		switch {
		case b.Pass == "":
			return seckill.ErrPassRequired
		case !s.passes.Valid(b.Pass, b.UserID, sale, s.now()):
			return seckill.ErrPassInvalid
		}
	}
	switch {
	case !st.RequireTicket:
		return nil
	case b.Ticket == "":
		return seckill.ErrTicketRequired
	case !s.signer.Valid(b.Ticket, b.UserID, sale, s.now()):
		return seckill.ErrTicketInvalid
	}
	return nil
}

// open reads a sale's stock and refuses it unless the sale is open now
// (active, or sold out: a ticket may still meet returned stock).
func (s *Service) open(ctx context.Context, sale int64) (seckill.Stock, error) {
	st, err := s.sales.Stock(ctx, sale)
	if err != nil {
		return st, err
	}
	return st, st.PhaseAt(s.now()).Refusal()
}

// Challenge is a proof of work to solve for a ticket.
type Challenge struct {
	Challenge  string
	Difficulty int
	ExpiresAt  time.Time
}

// Bounds of a solution's strings: a challenge is 32 hex digits, a nonce
// whatever the solver counts in, printable ASCII.
const (
	challengeLen = 32
	maxNonceLen  = 64
)

// Challenge hands out a proof-of-work challenge for an open sale that asks
// for one: 16 random bytes in hex, kept under the sale and the user with
// its difficulty until it is used or expires. A user has one challenge a
// sale: a new one replaces the last, so a script asking for many keeps no
// more in Redis than a person does.
func (s *Service) Challenge(ctx context.Context, sale int64, user string) (Challenge, error) {
	st, err := s.open(ctx, sale)
	if err != nil {
		return Challenge{}, err
	}
	if st.PowDifficulty == 0 {
		return Challenge{}, seckill.Errorf(seckill.CodeNotFound, "This sale asks for no proof of work: POST /api/sales/%d/ticket with {}.", sale)
	}
	var raw [challengeLen / 2]byte
	_, _ = rand.Read(raw[:]) // never fails (crypto/rand)
	c := Challenge{Challenge: hex.EncodeToString(raw[:]), Difficulty: st.PowDifficulty, ExpiresAt: s.now().Add(s.ttl)}
	if err := s.challenges.PutChallenge(ctx, sale, user, c.Challenge, c.Difficulty, s.ttl); err != nil {
		return Challenge{}, unavailable(err)
	}
	return c, nil
}

// Ticket is a buy ticket and when it stops serving.
type Ticket struct {
	Ticket    string
	ExpiresAt time.Time
	// Solved is set when a challenge was solved for it.
	Solved bool
}

// Ticket hands out a buy ticket for an open sale. Once the sale is known
// to be open, solution reads the request's answer to the user's challenge
// (ch and nonce; "" when it gave none), which must solve it when the sale
// asks for a proof of work: seckill.ErrPowInvalid when it does not.
func (s *Service) Ticket(ctx context.Context, sale int64, user string, solution func() (ch, nonce string, err error)) (Ticket, error) {
	st, err := s.open(ctx, sale)
	if err != nil {
		return Ticket{}, err
	}
	ch, nonce, err := solution()
	if err != nil {
		return Ticket{}, err
	}
	var t Ticket
	if st.PowDifficulty > 0 {
		if err := s.redeem(ctx, sale, user, ch, nonce); err != nil {
			return Ticket{}, err
		}
		t.Solved = true
	}
	exp := s.now().Add(s.ttl)
	t.Ticket, t.ExpiresAt = s.signer.Mint(user, sale, exp), exp.Truncate(time.Second)
	return t, nil
}

// redeem uses up user's challenge of sale, if it is ch and nonce solves
// it. The challenge is taken before anything is checked: a wrong answer
// costs the solver a new challenge, so one cannot be guessed at.
func (s *Service) redeem(ctx context.Context, sale int64, user, ch, nonce string) error {
	if len(ch) != challengeLen || strings.Trim(ch, "0123456789abcdef") != "" || !printable(nonce, maxNonceLen) {
		return seckill.ErrPowInvalid
	}
	issued, difficulty, ok, err := s.challenges.TakeChallenge(ctx, sale, user)
	switch {
	case err != nil:
		return unavailable(err)
	case !ok, issued != ch, !Solves(ch, nonce, difficulty):
		return seckill.ErrPowInvalid
	}
	return nil
}

// unavailable marks a failure of the store behind these routes as the
// backing service's (503: retry), unless it is a refusal with a code of
// its own.
func unavailable(err error) error {
	if seckill.CodeOf(err) == seckill.CodeInternal {
		return fmt.Errorf("tickets: %w: %w", seckill.ErrUnavailable, err)
	}
	return err
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
