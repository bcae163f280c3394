package inventory

import (
	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/lua"
)

// The scripts of a sale's live state (package lua has their sources),
// ready to Run: EVALSHA, then EVAL on NOSCRIPT.
var (
	buyScript     = redis.NewScript(lua.Buy)
	warmScript    = redis.NewScript(lua.Warm)
	restockScript = redis.NewScript(lua.Restock)
	releaseScript = redis.NewScript(lua.Release)
	statusScript  = redis.NewScript(lua.Status)
	moveScript    = redis.NewScript(lua.Move)
	acceptScript  = redis.NewScript(lua.Accept)
	queueScript   = redis.NewScript(lua.Queue)
	settleScript  = redis.NewScript(lua.Settle)
)
