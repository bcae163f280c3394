package inventory

import "strconv"

// Keys builds the Redis key names of every sale. All keys of one sale carry
// the sale id as a hash tag ({id}), so a script touching them stays in one
// Redis Cluster slot. The prefix separates deployments and test runs.
type Keys struct {
	prefix string
}

// NewKeys returns the key builder for a prefix such as "sk".
func NewKeys(prefix string) Keys { return Keys{prefix: prefix} }

func (k Keys) sale(id int64, name string) string {
	return k.prefix + ":{" + strconv.FormatInt(id, 10) + "}:" + name
}

// Stock is the sale's stock hash: total, available, sold, limit, start, end,
// status, price, expire_at.
func (k Keys) Stock(id int64) string { return k.sale(id, "stock") }

// Buyers maps user id to the units that user holds in the sale.
func (k Keys) Buyers(id int64) string { return k.sale(id, "buyers") }

// Reqs maps "user_id|request_id" to the stored answer of that request.
func (k Keys) Reqs(id int64) string { return k.sale(id, "reqs") }

// Outbox is the stream of accepted order events, drained by the relay.
func (k Keys) Outbox(id int64) string { return k.sale(id, "outbox") }

// Orders maps order id to "user_id|qty|request_id|ts" for accepted orders.
func (k Keys) Orders(id int64) string { return k.sale(id, "orders") }

// Released is the set of order ids whose units went back on sale.
func (k Keys) Released(id int64) string { return k.sale(id, "released") }

// Outcomes counts buy outcomes by code, for the merchant's dashboard.
func (k Keys) Outcomes(id int64) string { return k.sale(id, "outcomes") }

// All lists every key of a sale, stock hash first.
func (k Keys) All(id int64) []string {
	return []string{k.Stock(id), k.Buyers(id), k.Reqs(id), k.Outbox(id), k.Orders(id), k.Released(id), k.Outcomes(id)}
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
