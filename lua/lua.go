// Package lua holds the Redis scripts that decide Seckill's stock, one file
// per script, each headed by its KEYS, ARGV and return values, as source
// text: the store that owns a script's keys runs it (with EVALSHA, falling
// back to EVAL when Redis has lost it).
package lua

import _ "embed"

// The scripts' sources.
var (
	//go:embed buy.lua
	Buy string
	//go:embed warm.lua
	Warm string
	//go:embed restock.lua
	Restock string
	//go:embed release.lua
	Release string
	//go:embed status.lua
	Status string
	//go:embed move.lua
	Move string
	//go:embed accept.lua
	Accept string
	//go:embed queue.lua
	Queue string
	//go:embed funds.lua
	Funds string
	//go:embed follow.lua
	Follow string
	//go:embed hold.lua
	Hold string
	//go:embed settle.lua
	Settle string
)
