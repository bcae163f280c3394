package rdb

import (
	"context"
	"errors"
	"io"
	"net"
	"syscall"

	"github.com/redis/go-redis/v9"
)

// Nil is Redis's answer for a key or field that does not exist.
const Nil = redis.Nil

// Redirected reports whether a Redis error says the command went to a node
// that does not serve its slot now (a failover or resharding in progress):
// nothing ran, and the command can go again once the client knows better.
func Redirected(err error) bool {
	for _, prefix := range []string{"MOVED", "ASK", "TRYAGAIN", "CLUSTERDOWN", "READONLY", "LOADING", "MASTERDOWN"} {
		if redis.HasErrorPrefix(err, prefix) {
			return true
		}
	}
	return false
}

// Transient reports whether a Redis error may pass if the command is sent
// again: Redis is unreachable or going away, a connection broke, the pool
// or a deadline ran out, a failover is in progress, or the replicas did
// not confirm a write in time (ErrNotDurable).
func Transient(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) || Redirected(err) || errors.Is(err, ErrNotDurable) ||
		errors.Is(err, redis.ErrPoolTimeout) || errors.Is(err, redis.ErrClosed) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, context.DeadlineExceeded)
}
