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
// that the buckets land on different masters. A sale's stock is only ever
// named through its parts (Store.Parts lists them): there is no key of
// "the sale's stock" besides the first part's.
//
// A few records belong to the sale as a whole, whatever its parts (buy
// outcomes, capped users, proof-of-work challenges, chore turns); they
// carry the sale id as their tag.
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
// its stock hash also holds the tags of the others.
func First(sale int64) Part { return Part{Sale: sale, Tag: strconv.FormatInt(sale, 10)} }

// Of returns the keys of one part.
func (k Keys) Of(p Part) PartKeys { return PartKeys{base: k.prefix + ":{" + p.Tag + "}:"} }

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

// Orders maps order id to the record of an accepted order (codec.go).
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
