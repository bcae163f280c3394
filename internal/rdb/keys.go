package rdb

import "strconv"

// Keys builds the name of every Redis key Seckill uses: this file is the
// one place a key format is spelled. The prefix separates deployments and
// test runs.
//
// A sale's stock lives in one or more parts: the whole sale, or (a sale
// created with buckets: K) K buckets whose units add up to the sale's. Each
// part has its own keys, all carrying the part's hash tag, so a script
// touching them stays in one Redis Cluster slot: the sale id for the first
// part ({7}), the sale id and a suffix for the others ({7.4}), chosen so
// that the buckets land on different masters (package inventory names a
// sale's parts).
//
// A few records belong to the sale as a whole, whatever its parts (buy
// outcomes, capped users, proof-of-work challenges, the waiting room,
// chore turns); they carry the sale id as their tag. The records of
// sessions and sign-ins carry no tag: each is one key.
type Keys struct {
	prefix string
}

// NewKeys returns the key builder for a prefix such as "sk".
func NewKeys(prefix string) Keys { return Keys{prefix: prefix} }

// Prefix is what starts every key.
func (k Keys) Prefix() string { return k.prefix }

// Part returns the keys of the stock part with hash tag tag.
func (k Keys) Part(tag string) PartKeys { return PartKeys{base: k.prefix + ":{" + tag + "}:"} }

// PartKeys names the keys of one part of a sale.
type PartKeys struct{ base string }

// Stock is the part's stock hash: total, available, sold, limit, start,
// end, status, price, expire_at, buckets, ticket, pow (and, in the first
// part, tags).
func (p PartKeys) Stock() string { return p.base + "stock" }

// Buyers maps user id to the units that user holds in the part.
func (p PartKeys) Buyers() string { return p.base + "buyers" }

// Reqs maps "user_id|request_id" to the stored answer of that request.
func (p PartKeys) Reqs() string { return p.base + "reqs" }

// Outbox is the stream of accepted order events, drained by the relay.
func (p PartKeys) Outbox() string { return p.base + "outbox" }

// Orders maps order id to the record of an accepted order.
func (p PartKeys) Orders() string { return p.base + "orders" }

// Released is the set of order ids whose units went back on sale.
func (p PartKeys) Released() string { return p.base + "released" }

// Moves maps the id of a move of units out of this part, not yet known to
// have arrived, to "destination tag|units" (the rebalancer's outbox).
func (p PartKeys) Moves() string { return p.base + "moves" }

// Arrived is the set of move ids whose units this part has received.
func (p PartKeys) Arrived() string { return p.base + "arrived" }

// Fence is a counter written only to learn when the replicas have every
// write made to the part so far (Replicas.Fence).
func (p PartKeys) Fence() string { return p.base + "fence" }

// All lists every key of the part, stock hash first.
func (p PartKeys) All() []string {
	return []string{p.Stock(), p.Buyers(), p.Reqs(), p.Outbox(), p.Orders(), p.Released(), p.Moves(), p.Arrived(), p.Fence()}
}

// sale is the start of the keys a sale has as a whole.
func (k Keys) sale(sale int64) string { return k.prefix + ":{" + strconv.FormatInt(sale, 10) + "}:" }

// Outcomes counts buy outcomes by code, for the merchant's dashboard.
func (k Keys) Outcomes(sale int64) string { return k.sale(sale) + "outcomes" }

// Capped ranks the users first refused for their cap in a sale, by time.
func (k Keys) Capped(sale int64) string { return k.sale(sale) + "capped" }

// Challenge holds a user's proof-of-work challenge for a sale until it is
// used or expires.
func (k Keys) Challenge(sale int64, user string) string { return k.sale(sale) + "challenge:" + user }

// Queue is a sale's waiting room: user id to score (queue.lua).
func (k Keys) Queue(sale int64) string { return k.sale(sale) + "queue" }

// Room is the state of a sale's waiting room's admission (queue.lua).
func (k Keys) Room(sale int64) string { return k.sale(sale) + "room" }

// Turn is held (with an expiry) by the process whose turn it is to do a
// periodic chore for a sale, such as reconciling it.
func (k Keys) Turn(chore string, sale int64) string { return k.sale(sale) + "turn:" + chore }

// StockChanged is the pub/sub channel on which a change to a sale's stock
// or status (restock, release, status change, warm-up) is announced to
// every server process.
func (k Keys) StockChanged() string { return k.prefix + ":stock-changed" }

// SignOuts maps each shopper who signed out to when (unix seconds, as the
// score of a sorted set): tokens issued before are refused.
func (k Keys) SignOuts() string { return k.prefix + ":signouts" }

// SignedOut is the pub/sub channel announcing a shopper's sign-out.
func (k Keys) SignedOut() string { return k.prefix + ":signed-out" }

// AdminSession is an admin login session, by its token.
func (k Keys) AdminSession(token string) string { return k.prefix + ":admin:session:" + token }

// Relay is a relay's heartbeat, by its consumer name: while it lives
// the relay is alive, and the outbox entries it read are its own (see
// Outbox.Claim).
func (k Keys) Relay(consumer string) string { return k.prefix + ":relay:" + consumer }

// SignIn is a sign-in under way between its two requests (an OpenID
// Connect login's state, a passkey ceremony's challenge), by its kind and
// id.
func (k Keys) SignIn(kind, id string) string { return k.prefix + ":signin:" + kind + ":" + id }

// Funds returns the keys of funds group g: the balances of the accounts
// hashed to it, the records of the movements decided on them, and its
// outbox, all carrying the group's tag (one Cluster slot).
func (k Keys) Funds(g int) FundsKeys {
	return FundsKeys{base: k.prefix + ":funds:{" + strconv.Itoa(g) + "}"}
}

// FundsKeys names the keys of one funds group.
type FundsKeys struct{ base string }

// Balances maps each account of the group to its balance in cents.
func (f FundsKeys) Balances() string { return f.base }

// Movement is the record of a movement decided on an account of the
// group ("ok|sum|balance", or "void" once cancelled before it was made),
// kept for a while so a retry answers the first decision.
func (f FundsKeys) Movement(id string) string { return f.base + ":m:" + id }

// Held maps each account of the group to the cents its pending holds set
// aside (an instant checkout's, across Cluster slots: hold.lua).
func (f FundsKeys) Held() string { return f.base + ":held" }

// Holds orders the group's pending holds by deadline (the sorted set's
// score, unix ms; members are the holds' movement ids), for the sweep
// that settles those whose process died.
func (f FundsKeys) Holds() string { return f.base + ":holds" }

// Followed is set once a movement's share of an account of the group is
// applied (follow.lua).
func (f FundsKeys) Followed(id, account string) string { return f.base + ":f:" + id + ":" + account }

// Outbox is the stream of the movements decided on the group's accounts,
// drained by the funds relay.
func (f FundsKeys) Outbox() string { return f.base + ":outbox" }

// Fence is a counter written only to learn when the replicas have every
// write made to the group so far (Replicas.Fence).
func (f FundsKeys) Fence() string { return f.base + ":fence" }
