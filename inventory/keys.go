package inventory

import "strconv"

// Keys builds the Redis key names of every sale. The prefix separates
// deployments and test runs.
//
// A sale's stock lives in one or more parts: the whole sale, or (a sale
// created with buckets: K) K buckets whose units add up to the sale's. Each
// part has its own keys, all carrying the part's hash tag, so a script
// touching them stays in one Redis Cluster slot: the sale id for the first
// part ({7}), the sale id and a suffix for the others ({7.4}), chosen so
// that the buckets land on different masters.
type Keys struct {
	prefix string
}

// NewKeys returns the key builder for a prefix such as "sk".
func NewKeys(prefix string) Keys { return Keys{prefix: prefix} }

// Part is one stock part of a sale: its sale id and its hash tag.
type Part struct {
	Sale int64
	Tag  string
}

// First is a sale's first part, the only one of a sale without buckets;
// its stock hash also holds the sale's list of parts.
func First(sale int64) Part { return Part{Sale: sale, Tag: strconv.FormatInt(sale, 10)} }

// Of returns the keys of one part.
func (k Keys) Of(p Part) PartKeys { return PartKeys{base: k.prefix + ":{" + p.Tag + "}:"} }

// PartKeys names the keys of one part of a sale.
type PartKeys struct{ base string }

// Stock is the part's stock hash: total, available, sold, limit, start,
// end, status, price, expire_at, buckets (and, in the first part, tags).
func (p PartKeys) Stock() string { return p.base + "stock" }

// Buyers maps user id to the units that user holds in the part.
func (p PartKeys) Buyers() string { return p.base + "buyers" }

// Reqs maps "user_id|request_id" to the stored answer of that request.
func (p PartKeys) Reqs() string { return p.base + "reqs" }

// Outbox is the stream of accepted order events, drained by the relay.
func (p PartKeys) Outbox() string { return p.base + "outbox" }

// Orders maps order id to "user_id|qty|request_id|ts|price" for accepted
// orders.
func (p PartKeys) Orders() string { return p.base + "orders" }

// Released is the set of order ids whose units went back on sale.
func (p PartKeys) Released() string { return p.base + "released" }

// Moves maps the id of a move of units out of this part, not yet known to
// have arrived, to "destination tag|units" (the rebalancer's outbox).
func (p PartKeys) Moves() string { return p.base + "moves" }

// Arrived is the set of move ids whose units this part has received.
func (p PartKeys) Arrived() string { return p.base + "arrived" }

// Fence is a counter written only to learn when the replicas have every
// write made to the part so far (see Store.Durable).
func (p PartKeys) Fence() string { return p.base + "fence" }

// All lists every key of the part, stock hash first.
func (p PartKeys) All() []string {
	return []string{p.Stock(), p.Buyers(), p.Reqs(), p.Outbox(), p.Orders(), p.Released(), p.Moves(), p.Arrived(), p.Fence()}
}

// Stock is the first part's stock hash of a sale (the whole stock of a
// sale without buckets).
func (k Keys) Stock(sale int64) string { return k.Of(First(sale)).Stock() }

// Buyers is the first part's buyers hash of a sale.
func (k Keys) Buyers(sale int64) string { return k.Of(First(sale)).Buyers() }

// Reqs is the first part's request answers of a sale.
func (k Keys) Reqs(sale int64) string { return k.Of(First(sale)).Reqs() }

// Outbox is the first part's outbox stream of a sale.
func (k Keys) Outbox(sale int64) string { return k.Of(First(sale)).Outbox() }

// Orders is the first part's accepted orders of a sale.
func (k Keys) Orders(sale int64) string { return k.Of(First(sale)).Orders() }

// Outcomes counts buy outcomes by code, for the merchant's dashboard (one
// per sale, whatever its parts).
func (k Keys) Outcomes(sale int64) string {
	return k.prefix + ":{" + strconv.FormatInt(sale, 10) + "}:outcomes"
}

// Capped ranks the users first refused for their cap in a sale, by time.
func (k Keys) Capped(sale int64) string {
	return k.prefix + ":{" + strconv.FormatInt(sale, 10) + "}:capped"
}

// Challenge holds a user's proof-of-work challenge for a sale until it is
// used or expires.
func (k Keys) Challenge(sale int64, user string) string {
	return k.prefix + ":{" + strconv.FormatInt(sale, 10) + "}:challenge:" + user
}

// Turn is held (with an expiry) by the process whose turn it is to do a
// periodic chore for a sale, such as reconciling it.
func (k Keys) Turn(chore string, sale int64) string {
	return k.prefix + ":{" + strconv.FormatInt(sale, 10) + "}:turn:" + chore
}

// StockChanged is the pub/sub channel on which stock returning to a sale
// (restock, release) is announced to every server process.
func (k Keys) StockChanged() string { return k.prefix + ":stock-changed" }

// SignOuts maps each user who signed out to when (unix seconds, as the
// score of a sorted set): tokens issued before are refused.
func (k Keys) SignOuts() string { return k.prefix + ":signouts" }

// SignedOut is the pub/sub channel announcing a sign-out, "user|epoch".
func (k Keys) SignedOut() string { return k.prefix + ":signed-out" }

// AdminSession is an admin login session.
func (k Keys) AdminSession(token string) string { return k.prefix + ":admin:session:" + token }
