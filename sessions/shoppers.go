package sessions

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/rdb"
	"github.com/seckill/seckill/internal/wait"
)

// Config is what Shoppers and Admins need to know.
type Config struct {
	// Prefix starts their Redis keys.
	Prefix string
	// Secret signs shopper session tokens.
	Secret []byte
	// TTL is the life of a shopper's session token, and so how long a
	// sign-out is kept.
	TTL time.Duration
	// AdminPassword is the admin panel's password, in plain text or as a
	// bcrypt hash; AdminToken the bearer token of scripts ("": none).
	AdminPassword string
	AdminToken    string
	// Keeper, if set, keeps admin sessions and sign-outs where they
	// outlive Redis (embedded mode); they are answered once kept.
	Keeper Keeper
}

// A Provider verifies the tokens an identity provider issued (an OpenID
// Connect provider's ID tokens): the user, and when the token expires.
type Provider interface {
	Verify(ctx context.Context, raw string) (User, time.Time, error)
}

// Shoppers issues and checks shopper session tokens, and with a Provider
// the provider's tokens too (any token not signed HS256 goes to it).
//
// Signing out revokes a shopper's tokens, not only the cookie: each user
// has a session epoch, the time of their last sign-out, and tokens issued
// until then are refused (sign-out ends every session of that user). The
// epochs live in a sorted set in Redis (user → unix seconds); every
// process keeps a copy in memory, so checking a token costs no round
// trip. A sign-out is announced over pub/sub and applied by every process
// at once; the whole set is read again at start (Load), on reconnection
// and every resync, so a lost message costs at most that long. Epochs are
// kept for TTL, the life of the tokens.
type Shoppers struct {
	rdb      rdb.Client
	keys     rdb.Keys
	keeper   Keeper
	secret   []byte
	ttl      time.Duration
	now      func() time.Time
	parser   *jwt.Parser
	tokens   *tokenCache
	provider Provider

	mu sync.RWMutex
	at map[string]int64 // user → unix seconds of the last sign-out
}

// signOutResync is how often the whole set is read again.
const signOutResync = 30 * time.Second

// NewShoppers returns the shoppers' sessions on rdb, on the clock now.
func NewShoppers(c rdb.Client, cfg Config, now func() time.Time) *Shoppers {
	return &Shoppers{
		rdb: c, keys: rdb.NewKeys(cfg.Prefix), keeper: cfg.Keeper, secret: cfg.Secret, ttl: cfg.TTL, now: now,
		parser: jwt.NewParser(jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg()}), jwt.WithExpirationRequired(), jwt.WithTimeFunc(now)),
		tokens: newTokenCache(),
		at:     map[string]int64{},
	}
}

// Accept makes the tokens of p good on every shopper route, beside the
// session tokens. Call it before serving.
func (s *Shoppers) Accept(p Provider) { s.provider = p }

// Mint issues a session token for a user, valid for the configured TTL.
// A token is dated after the user's last sign-out: signing out and in
// again within a second must not revoke the new session (token times are
// whole seconds).
func (s *Shoppers) Mint(u User) (string, time.Time, error) {
	now := s.now()
	s.mu.RLock()
	epoch, ok := s.at[u.ID]
	s.mu.RUnlock()
	if ok && now.Unix() <= epoch {
		now = time.Unix(epoch+1, 0)
	}
	return mint(s.secret, u, s.ttl, now)
}

// Verify returns the user of a session token (or of the provider's token),
// or why it is refused (ErrNoToken, ErrBadToken, ErrExpired, ErrSignedOut,
// or the provider's). A token verified before is taken from the cache
// (until it expires), so a signature is checked once per token; whether
// its user signed out since is checked every time.
func (s *Shoppers) Verify(ctx context.Context, raw string) (User, error) {
	if raw == "" {
		return User{}, ErrNoToken
	}
	now := s.now()
	u, ok := s.tokens.get(raw, now)
	if !ok {
		var exp time.Time
		var err error
		if s.provider != nil && !sessionToken(raw) {
			u, exp, err = s.provider.Verify(ctx, raw)
			// A sign-out is kept for the TTL: a provider's token lives no
			// longer here, whatever its exp.
			if err == nil && (u.IssuedAt == 0 || now.Unix() > u.IssuedAt+int64(s.ttl/time.Second)) {
				err = ErrExpired
			}
			if limit := time.Unix(u.IssuedAt, 0).Add(s.ttl); limit.Before(exp) {
				exp = limit
			}
		} else {
			u, exp, err = s.verify(raw)
		}
		if err != nil {
			return User{}, err
		}
		s.tokens.put(raw, u, exp)
	}
	if s.revoked(u.ID, u.IssuedAt) {
		return User{}, ErrSignedOut
	}
	return u, nil
}

// revoked reports whether a token of user issued at iat (unix seconds; 0
// when the token does not say) predates the user's last sign-out.
func (s *Shoppers) revoked(user string, iat int64) bool {
	s.mu.RLock()
	epoch, ok := s.at[user]
	s.mu.RUnlock()
	return ok && iat <= epoch
}

// SignOut records that user signed out now, here and in Redis, and
// announces it to the other processes.
func (s *Shoppers) SignOut(ctx context.Context, user string) error {
	now := s.now()
	epoch := now.Unix()
	s.note(user, epoch)
	key := s.keys.SignOuts()
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.ZAddGT(ctx, key, redis.Z{Score: float64(epoch), Member: user})
		p.ZRemRangeByScore(ctx, key, "-inf", strconv.FormatInt(now.Add(-s.ttl).Unix(), 10))
		p.Expire(ctx, key, s.ttl)
		return nil
	})
	if err != nil {
		return failed("record sign-out", err)
	}
	if s.keeper != nil {
		if err := s.keeper.KeepSession(ctx, keptSignOut+user, strconv.FormatInt(epoch, 10), now.Add(s.ttl)); err != nil {
			return err
		}
	}
	// Announced only once recorded: a process that subscribes after the
	// message must find the sign-out when it reads the set. In one
	// pipeline a Redis Cluster may run the PUBLISH first, on another node,
	// and a process subscribing in between missed both.
	if err := s.rdb.Publish(ctx, s.keys.SignedOut(), signOutMessage(user, epoch)).Err(); err != nil {
		return failed("announce sign-out", err)
	}
	return nil
}

// signOutMessage is the announcement of a sign-out: "user|epoch".
func signOutMessage(user string, epoch int64) string {
	return user + "|" + strconv.FormatInt(epoch, 10)
}

// parseSignOut reads what signOutMessage wrote.
func parseSignOut(payload string) (user string, epoch int64, ok bool) {
	user, e, ok := strings.Cut(payload, "|")
	n, err := strconv.ParseInt(e, 10, 64)
	return user, n, ok && err == nil
}

func (s *Shoppers) note(user string, epoch int64) {
	s.mu.Lock()
	s.at[user] = max(s.at[user], epoch)
	s.mu.Unlock()
}

// Load replaces the copy of the sign-outs with the set in Redis (at start:
// tokens revoked by a sign-out stay refused across a restart).
func (s *Shoppers) Load(ctx context.Context) error {
	zs, err := s.rdb.ZRangeByScoreWithScores(ctx, s.keys.SignOuts(), &redis.ZRangeBy{
		Min: strconv.FormatInt(s.now().Add(-s.ttl).Unix(), 10), Max: "+inf",
	}).Result()
	if err != nil {
		return fmt.Errorf("sessions: read sign-outs: %w", err)
	}
	at := make(map[string]int64, len(zs))
	for _, z := range zs {
		if user, ok := z.Member.(string); ok {
			at[user] = int64(z.Score)
		}
	}
	s.mu.Lock()
	for user, epoch := range s.at { // signed out here since the read began
		at[user] = max(at[user], epoch)
	}
	s.at = at
	s.mu.Unlock()
	return nil
}

// Run applies other processes' sign-outs until ctx ends.
func (s *Shoppers) Run(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() {
		wait.Every(ctx, signOutResync, func() {
			if err := s.Load(ctx); err != nil && ctx.Err() == nil {
				slog.Warn("sessions: reading sign-outs failed", "err", err)
			}
		})
	})
	rdb.Follow(ctx, s.rdb, s.keys.SignedOut(), s.Load, func(payload string) {
		if user, epoch, ok := parseSignOut(payload); ok {
			s.note(user, epoch)
		}
	})
}
