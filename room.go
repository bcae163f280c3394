package seckill

// Queue is a sale's waiting room as one step of it left it (API.md,
// Waiting room).
type Queue struct {
	// Place is the shopper's place in the queue (1 is first), 0 for one
	// who has not joined. A place taken before the start may still move
	// while others join; from the start it is fixed.
	Place int64
	// AdmittedThrough is the last place let in: places up to it may buy.
	AdmittedThrough int64
	// Size is how many have joined; JoinedBeforeStart how many of them
	// joined before the start (drawn at random places).
	Size, JoinedBeforeStart int64
	// SoldOut is set once the sale's stock is gone: the room lets nobody
	// more in.
	SoldOut bool
}

// QueueStatus is where a shopper stands in a waiting room.
type QueueStatus string

// The statuses of API.md.
const (
	QueueWaiting    QueueStatus = "waiting"
	QueueAdmitted   QueueStatus = "admitted"
	QueueSoldOut    QueueStatus = "sold_out"
	QueueNotInQueue QueueStatus = "not_in_queue"
)

// Status is where the shopper of q stands.
func (q Queue) Status() QueueStatus {
	switch {
	case q.SoldOut:
		return QueueSoldOut
	case q.Place == 0:
		return QueueNotInQueue
	case q.Place <= q.AdmittedThrough:
		return QueueAdmitted
	}
	return QueueWaiting
}
