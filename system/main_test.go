package system_test

import (
	"os"
	"testing"

	"github.com/seckill/seckill/system/servertest"
)

func TestMain(m *testing.M) { os.Exit(servertest.Main(m)) }
