package seckill

import "time"

// Buy is one shopper's request to buy from a sale.
type Buy struct {
	UserID    string
	Qty       int64
	RequestID string
	// Ticket is the buy ticket the buy carries ("" for none), for a sale
	// that requires one (package tickets checks it).
	Ticket string
	// Pass is the waiting room's admission pass the buy carries ("" for
	// none), for a sale with a waiting room (package tickets checks it).
	Pass string
	// Trace is the W3C traceparent of the buy request's span ("" when not
	// traced): the stock's call for a batch links to it (internal/tracing).
	Trace string
	// Verified is whether the buyer's identity is verified, for a sale
	// that is verified_only (package tickets checks it with the ticket).
	Verified bool
	// OrderID is the id the order gets if the buy is accepted. Empty, one
	// is made (NewOrderID) only when the buy is decided by the stock, not
	// for answers given from memory. A repeated request id gets the id
	// stored the first time instead.
	OrderID string
	// Hold is the wallet hold an instant-checkout buy carries where its
	// wallet and its sale live apart (a Redis Cluster): the stock step
	// accepts it only before the hold's deadline and for its amount (nil:
	// no hold; on one Redis the buy's own call charges the wallet).
	Hold *Hold
}

// Hold is money set aside in a buyer's wallet for one attempt at an
// instant-checkout buy (package checkout): the charge of the order the
// attempt would get (OrderID of its Buy), posted if the stock step accepts
// the order, voided otherwise.
type Hold struct {
	Amount   int64
	Deadline time.Time
}

// Answer is the decision on one Buy.
type Answer struct {
	// Code is CodeOK for an accepted buy, else the refusal.
	Code    Code
	OrderID string
	Qty     int64
	// Remaining is the sale's units left right after the buy was decided.
	Remaining int64
	// ChargeID is the charge that paid an accepted instant-checkout buy's
	// order ("" for an order that waits for its payment).
	ChargeID string
}

// Decision is what the stock decided for a batch of buys of one sale: an
// answer per buy, in order, and the sale as the batch left it.
type Decision struct {
	Answers []Answer
	// Available is the units the sale had left after the batch.
	Available int64
	// Closed is the refusal every new buy would get now (CodeEnded,
	// CodePaused, CodeNotStarted, CodeSaleNotFound), or "" while the sale
	// takes buys.
	Closed Code
}

// SoldOut is the refusal every new buy would get after this decision for
// lack of stock or time, as the sold-out fast path remembers it: CodeEnded
// for an ended sale, CodeSoldOut for an open one with no units left, or ""
// when buys may still be accepted (or are refused for a passing reason:
// paused, not started).
func (d Decision) SoldOut() Code {
	switch {
	case d.Closed == CodeEnded:
		return CodeEnded
	case d.Closed == "" && d.Available <= 0:
		return CodeSoldOut
	}
	return ""
}
