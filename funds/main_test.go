package funds_test

import (
	"os"
	"testing"

	"github.com/seckill/seckill/system/servertest"
)

// TestMain stops the topologies the tests shared (a Redis Cluster under
// SECKILL_TEST_REDIS=cluster).
func TestMain(m *testing.M) { os.Exit(servertest.Main(m)) }
