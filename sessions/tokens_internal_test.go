package sessions

import (
	"strconv"
	"testing"
	"time"
)

// TestTokenCacheHonoursExpiry: a cached token stops serving at its expiry,
// a token is found only by its whole text, and a full shard starts afresh
// instead of growing.
func TestTokenCacheHonoursExpiry(t *testing.T) {
	c := newTokenCache()
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	c.put("tok-a", User{ID: "a"}, now.Add(time.Minute))
	if u, ok := c.get("tok-a", now); !ok || u.ID != "a" {
		t.Fatalf("get before expiry = %+v, %v; want user a", u, ok)
	}
	if _, ok := c.get("tok-a", now.Add(time.Minute)); ok {
		t.Fatal("a token is served from the cache at its expiry")
	}
	if _, ok := c.get("tok-", now); ok {
		t.Fatal("a prefix of a cached token is found")
	}
	for i := range 2 * tokenCacheSize {
		c.put(strconv.Itoa(i)+"-tok", User{ID: "x"}, now.Add(time.Minute))
	}
	n := 0
	for i := range c.shards {
		n += len(c.shards[i].m)
	}
	if n > tokenCacheSize {
		t.Fatalf("cache holds %d tokens, bound %d", n, tokenCacheSize)
	}
}
