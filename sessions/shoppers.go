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

	"github.com/seckill/seckill/internal/wait"
	"github.com/seckill/seckill/inventory"
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
}

// Shoppers issues and checks shopper session tokens.
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
	rdb    redis.UniversalClient
	keys   keys
	secret []byte
	ttl    time.Duration
	now    func() time.Time
	parser *jwt.Parser
	tokens *tokenCache

	mu sync.RWMutex
	at map[string]int64 // user → unix seconds of the last sign-out
}

// signOutResync is how often the whole set is read again.
const signOutResync = 30 * time.Second

// NewShoppers returns the shoppers' sessions on rdb, on the clock now.
func NewShoppers(rdb redis.UniversalClient, cfg Config, now func() time.Time) *Shoppers {
	return &Shoppers{
		rdb: rdb, keys: keys{cfg.Prefix}, secret: cfg.Secret, ttl: cfg.TTL, now: now,
		parser: jwt.NewParser(jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg()}), jwt.WithExpirationRequired(), jwt.WithTimeFunc(now)),
		tokens: newTokenCache(),
		at:     map[string]int64{},
	}
}

// Mint issues a session token for a user, valid for the configured TTL.
func (s *Shoppers) Mint(userID, name string) (string, time.Time, error) {
	return MintToken(s.secret, userID, name, s.ttl, s.now())
}

// Verify returns the user of a session token, or why it is refused
// (ErrNoToken, ErrBadToken, ErrExpired, ErrSignedOut). A token verified
// before is taken from the cache (until it expires); whether its user
// signed out since is checked every time.
func (s *Shoppers) Verify(raw string) (User, error) {
	if raw == "" {
		return User{}, ErrNoToken
	}
	now := s.now()
	u, ok := s.tokens.get(raw, now)
	if !ok {
		var exp time.Time
		var err error
		if u, exp, err = s.verify(raw); err != nil {
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
	key := s.keys.signOuts()
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.ZAddGT(ctx, key, redis.Z{Score: float64(epoch), Member: user})
		p.ZRemRangeByScore(ctx, key, "-inf", strconv.FormatInt(now.Add(-s.ttl).Unix(), 10))
		p.Expire(ctx, key, s.ttl)
		return nil
	})
	if err != nil {
		return failed("record sign-out", err)
	}
	// Announced only once recorded: a process that subscribes after the
	// message must find the sign-out when it reads the set. In one
	// pipeline a Redis Cluster may run the PUBLISH first, on another node,
	// and a process subscribing in between missed both.
	if err := s.rdb.Publish(ctx, s.keys.signedOut(), signOutMessage(user, epoch)).Err(); err != nil {
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
	zs, err := s.rdb.ZRangeByScoreWithScores(ctx, s.keys.signOuts(), &redis.ZRangeBy{
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
	inventory.Follow(ctx, s.rdb, s.keys.signedOut(), s.Load, func(payload string) {
		if user, epoch, ok := parseSignOut(payload); ok {
			s.note(user, epoch)
		}
	})
}
