package identity

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"
)

// refetchEvery is how often at most the provider's key set is fetched
// again for a token whose key is unknown: a stream of tokens with made-up
// key ids costs the provider one request in that time, not one each.
const refetchEvery = 10 * time.Second

// keysMaxAge is how long a fetched key set is trusted: then it is fetched
// again at the next token, so a key the provider retired stops working
// within that time (if the fetch fails, the set known stays).
const keysMaxAge = time.Hour

// fetchTimeout bounds one fetch of the key set.
const fetchTimeout = 5 * time.Second

// keySet is the provider's signing keys (its JWKS), an oidc.KeySet. A
// token whose key id is unknown has the set fetched again (the provider
// rotated its keys), at most every refetchEvery; so does the first token
// after keysMaxAge. If the provider cannot be reached, the keys already
// known keep working.
type keySet struct {
	url    string
	client *http.Client
	now    func() time.Time

	mu      sync.RWMutex
	keys    []jose.JSONWebKey
	fetched time.Time // when keys were fetched
	tried   time.Time // the last fetch
	lastErr error     // its failure, or nil

	fetching sync.Mutex // one fetch at a time
}

func newKeySet(url string, client *http.Client, now func() time.Time) *keySet {
	return &keySet{url: url, client: client, now: now}
}

// fetchResult is where VerifySignature reports that it needed the
// provider and could not reach it (go-oidc keeps only the text of the
// error): the caller answers 503, not 401.
type fetchResult struct{ err error }

type fetchResultKey struct{}

func withFetchResult(ctx context.Context, r *fetchResult) context.Context {
	return context.WithValue(ctx, fetchResultKey{}, r)
}

// VerifySignature checks a token's signature with the key its header
// names and returns its payload. go-oidc has checked the algorithm.
func (k *keySet) VerifySignature(ctx context.Context, raw string) ([]byte, error) {
	jws, err := jose.ParseSigned(raw, []jose.SignatureAlgorithm{jose.RS256, jose.ES256})
	if err != nil {
		return nil, err
	}
	if len(jws.Signatures) != 1 {
		return nil, errors.New("identity: one signature expected")
	}
	kid := jws.Signatures[0].Header.KeyID
	if k.stale() {
		_ = k.refresh(ctx) // the keys known serve meanwhile
	}
	payload, ok, known := k.check(jws, kid)
	switch {
	case ok:
		return payload, nil
	case known:
		// A key of that id is known and did not sign it: forged or
		// tampered, whatever the provider says now.
		return nil, errBadSignature
	}
	if err := k.refresh(ctx); err != nil {
		if r, ok := ctx.Value(fetchResultKey{}).(*fetchResult); ok {
			r.err = err
		}
		return nil, err
	}
	if payload, ok, _ := k.check(jws, kid); ok {
		return payload, nil
	}
	return nil, errBadSignature
}

var errBadSignature = errors.New("identity: no key of the provider signed this token")

// check verifies jws with the known keys of id kid (all, when the token
// names none); known is whether a key of that id (or any key, for a token
// naming none) is known at all.
func (k *keySet) check(jws *jose.JSONWebSignature, kid string) (payload []byte, ok, known bool) {
	k.mu.RLock()
	keys := k.keys
	k.mu.RUnlock()
	for i := range keys {
		if kid != "" && keys[i].KeyID != kid {
			continue
		}
		known = true
		if payload, err := jws.Verify(&keys[i]); err == nil {
			return payload, true, true
		}
	}
	return nil, false, known && kid != ""
}

// stale reports whether the keys were fetched longer than keysMaxAge ago.
func (k *keySet) stale() bool {
	k.mu.RLock()
	defer k.mu.RUnlock()
	return !k.fetched.IsZero() && k.now().Sub(k.fetched) > keysMaxAge
}

// refresh fetches the key set again unless that was tried within
// refetchEvery, in which case it reports how that fetch went.
func (k *keySet) refresh(ctx context.Context) error {
	k.fetching.Lock()
	defer k.fetching.Unlock()
	k.mu.RLock()
	tried, lastErr := k.tried, k.lastErr
	k.mu.RUnlock()
	now := k.now()
	if !tried.IsZero() && now.Sub(tried) < refetchEvery {
		return lastErr
	}
	keys, err := k.fetch(ctx)
	k.mu.Lock()
	defer k.mu.Unlock()
	k.tried, k.lastErr = now, err
	if err == nil {
		k.keys, k.fetched = keys, now
	}
	return err
}

// fetch reads the key set. It does not end with the request that asked
// (a client that goes away must not make the next tokens wait 10 s), only
// with its own timeout.
func (k *keySet) fetch(ctx context.Context) ([]jose.JSONWebKey, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), fetchTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, k.url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := k.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("identity: fetch the provider's keys: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("identity: fetch the provider's keys: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("identity: fetch the provider's keys: %s", resp.Status)
	}
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(body, &set); err != nil {
		return nil, fmt.Errorf("identity: the provider's keys: %w", err)
	}
	keys := set.Keys[:0]
	for _, key := range set.Keys {
		if key.Valid() && key.IsPublic() && (key.Use == "" || key.Use == "sig") {
			keys = append(keys, key)
		}
	}
	return keys, nil
}

// randomToken is 32 random bytes in base64url: state, nonce, tokens sent by
// mail.
func randomToken() string {
	b := make([]byte, 32)
	rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}
