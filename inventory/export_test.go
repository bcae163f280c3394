package inventory

import "time"

// SetClock replaces the fast path's clock, so a test can move past a
// mark's recheck time without waiting for it.
func (f *FastPath) SetClock(now func() time.Time) { f.now = now }

// The record formats, for the tests that hold them against what the
// scripts write.
var (
	EncodeAnswer = encodeAnswer
	DecodeAnswer = decodeAnswer
	EncodeOrder  = encodeOrder
	DecodeOrder  = decodeOrder
	DecodeStock  = decodeStock
	StockFields  = stockFields
)

// ReqField is the reqs hash field of a request.
func ReqField(user, requestID string) string { return reqField(user, requestID) }
