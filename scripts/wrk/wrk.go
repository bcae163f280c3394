// Package wrk holds the wrk script of the buy endpoint (buy.lua), for
// people who load Seckill with wrk and for the benchmark suite, which
// drives every route of its outside case with it.
package wrk

import _ "embed"

// Script is buy.lua.
//
//go:embed buy.lua
var Script []byte
