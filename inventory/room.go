package inventory

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"strconv"
	"time"

	"github.com/seckill/seckill"
)

// The steps of a waiting room (queue.lua).
const (
	roomJoin = "join"
	roomRead = "read"
)

// JoinQueue puts user in a sale's waiting room, if not in it already, and
// returns the room with the user's place, after admitting what the time
// since the last step allows. Before the sale's start the place is a
// random draw from crypto/rand; after it, the next in arrival order.
// gone says the caller saw the sale's stock gone. Refusals:
// seckill.ErrNotStarted before the queue opens, ErrEnded, ErrSoldOut,
// ErrNotFound for a sale without a room, ErrSaleNotFound.
func (s *Store) JoinQueue(ctx context.Context, sale int64, user string, now time.Time, gone bool) (seckill.Queue, error) {
	return s.queueStep(ctx, sale, roomJoin, user, now, gone)
}

// ReadQueue returns a sale's waiting room, with user's place ("" for
// none), after admitting what the time since the last step allows.
func (s *Store) ReadQueue(ctx context.Context, sale int64, user string, now time.Time, gone bool) (seckill.Queue, error) {
	return s.queueStep(ctx, sale, roomRead, user, now, gone)
}

func (s *Store) queueStep(ctx context.Context, sale int64, op, user string, now time.Time, gone bool) (seckill.Queue, error) {
	keys := []string{s.partKeys(First(sale)).Stock(), s.keys.Queue(sale), s.keys.Room(sale)}
	reply, err := queueScript.Run(ctx, s.rdb, keys, op, now.UnixMilli(), user, draw(), flag(gone)).Text()
	if err != nil {
		return seckill.Queue{}, failed(fmt.Sprintf("waiting room of sale %d", sale), err)
	}
	code, f, err := decodeReply(reply, 5)
	if err != nil {
		return seckill.Queue{}, err
	}
	var q seckill.Queue
	for i, p := range []*int64{&q.Place, &q.AdmittedThrough, &q.Size, &q.JoinedBeforeStart} {
		if *p, err = strconv.ParseInt(f[i], 10, 64); err != nil {
			return seckill.Queue{}, fmt.Errorf("%w: reply %q", errFormat, reply)
		}
	}
	q.SoldOut = f[4] == "1"
	switch code {
	case seckill.CodeOK:
		return q, nil
	case seckill.CodeNotFound:
		return q, seckill.Errorf(seckill.CodeNotFound, "Sale %d has no waiting room: buy directly.", sale)
	}
	return q, code.Err()
}

// draw is a place drawn for a shopper joining before the start: uniform
// below 2^52, so that it is exact as a sorted set's score.
func draw() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return strconv.FormatUint(binary.BigEndian.Uint64(b[:])>>12, 10)
}

// BuyerCount is how many users hold units of a sale, across its parts.
func (s *Store) BuyerCount(ctx context.Context, sale int64) (int64, error) {
	parts, err := s.Parts(ctx, sale)
	if err != nil {
		return 0, err
	}
	var n int64
	for _, p := range parts {
		c, err := s.rdb.HLen(ctx, s.partKeys(p).Buyers()).Result()
		if err != nil {
			return 0, failed(fmt.Sprintf("count buyers of sale %d", sale), err)
		}
		n += c
	}
	return n, nil
}
