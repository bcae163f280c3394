// Package lua holds the Redis scripts that decide Seckill's stock, one file
// per script, each headed by its KEYS, ARGV and return values. The scripts
// run with EVALSHA and fall back to EVAL when Redis has lost them.
package lua

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed buy.lua
	buySrc string
	//go:embed warm.lua
	warmSrc string
	//go:embed restock.lua
	restockSrc string
	//go:embed release.lua
	releaseSrc string
	//go:embed status.lua
	statusSrc string
	//go:embed move.lua
	moveSrc string
	//go:embed accept.lua
	acceptSrc string
	//go:embed queue.lua
	queueSrc string
)

// The scripts, ready to Run.
var (
	Buy     = redis.NewScript(buySrc)
	Warm    = redis.NewScript(warmSrc)
	Restock = redis.NewScript(restockSrc)
	Release = redis.NewScript(releaseSrc)
	Status  = redis.NewScript(statusSrc)
	Move    = redis.NewScript(moveSrc)
	Accept  = redis.NewScript(acceptSrc)
	Queue   = redis.NewScript(queueSrc)
)
