package inventory

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/seckill/seckill"
)

// The records Seckill keeps in a sale's Redis keys and the replies of its
// scripts: each format is written and read here, in one place, and its
// Lua side is in the script that writes or reads it. Fields are separated
// by "|", which no field can hold (seckill.ValidUserID, ValidRequestID,
// order ids, codes, numbers).

var errFormat = errors.New("inventory: malformed record")

// reqField is the reqs hash field of a request: "user_id|request_id".
func reqField(user, requestID string) string { return user + "|" + requestID }

// encodeAnswer writes an answer as buy.lua returns and stores it:
// "code|order_id|qty|remaining".
func encodeAnswer(a seckill.Answer) string {
	return string(a.Code) + "|" + a.OrderID + "|" + strconv.FormatInt(a.Qty, 10) + "|" + strconv.FormatInt(a.Remaining, 10)
}

// decodeAnswer reads an answer written by buy.lua or encodeAnswer.
func decodeAnswer(s string) (seckill.Answer, error) {
	code, rest, ok1 := strings.Cut(s, "|")
	order, rest, ok2 := strings.Cut(rest, "|")
	qty, remaining, ok3 := strings.Cut(rest, "|")
	c, known := seckill.ParseCode(code)
	if !ok1 || !ok2 || !ok3 || !known {
		return seckill.Answer{}, fmt.Errorf("%w: answer %q", errFormat, s)
	}
	a := seckill.Answer{Code: c, OrderID: order}
	var err1, err2 error
	a.Qty, err1 = strconv.ParseInt(qty, 10, 64)
	a.Remaining, err2 = strconv.ParseInt(remaining, 10, 64)
	if err1 != nil || err2 != nil {
		return seckill.Answer{}, fmt.Errorf("%w: answer %q", errFormat, s)
	}
	return a, nil
}

// decodeBatch reads buy.lua's reply to n requests: an answer line per
// request, then "available|refusal", the refusal a code or "".
func decodeBatch(reply string, n int) (seckill.Decision, error) {
	lines := strings.Split(reply, "\n")
	if len(lines) != n+1 {
		return seckill.Decision{}, fmt.Errorf("%w: %d answers for %d requests", errFormat, len(lines)-1, n)
	}
	d := seckill.Decision{Answers: make([]seckill.Answer, n)}
	for i := range n {
		var err error
		if d.Answers[i], err = decodeAnswer(lines[i]); err != nil {
			return seckill.Decision{}, err
		}
	}
	avail, closed, _ := strings.Cut(lines[n], "|")
	var err error
	if d.Available, err = strconv.ParseInt(avail, 10, 64); err != nil {
		return seckill.Decision{}, fmt.Errorf("%w: batch line %q", errFormat, lines[n])
	}
	if closed != "" {
		c, ok := seckill.ParseCode(closed)
		if !ok {
			return seckill.Decision{}, fmt.Errorf("%w: batch line %q", errFormat, lines[n])
		}
		d.Closed = c
	}
	return d, nil
}

// encodeOrder writes the record of an accepted order as buy.lua keeps it
// in the orders hash: "user_id|qty|request_id|ts|price".
func encodeOrder(e seckill.Event) string {
	return e.UserID + "|" + strconv.FormatInt(e.Qty, 10) + "|" + e.RequestID + "|" + strconv.FormatInt(e.At, 10) +
		"|" + strconv.FormatInt(e.PriceCents, 10)
}

// decodeOrder reads the record of order id of a sale. Records written
// before prices were kept have four fields; their price reads -1.
func decodeOrder(sale int64, id, rec string) (seckill.Event, error) {
	f := strings.Split(rec, "|")
	if len(f) != 4 && len(f) != 5 {
		return seckill.Event{}, fmt.Errorf("%w: order %s: %q", errFormat, id, rec)
	}
	e := seckill.Event{OrderID: id, SaleID: sale, UserID: f[0], RequestID: f[2], PriceCents: -1}
	var errs [3]error
	e.Qty, errs[0] = strconv.ParseInt(f[1], 10, 64)
	e.At, errs[1] = strconv.ParseInt(f[3], 10, 64)
	if len(f) == 5 {
		e.PriceCents, errs[2] = strconv.ParseInt(f[4], 10, 64)
	}
	if err := errors.Join(errs[:]...); err != nil {
		return seckill.Event{}, fmt.Errorf("%w: order %s: %q", errFormat, id, rec)
	}
	return e, nil
}

// outboxField is the field of an outbox entry that holds its events;
// OutboxTraceField the one with the traceparent of the buy call's span,
// when it was traced (buy.lua).
const (
	outboxField      = "e"
	OutboxTraceField = "t"
)

// EncodeOutbox writes the fields of an outbox entry as buy.lua appends it:
// one field holding a line per order accepted by the call,
// "order_id|sale_id|user_id|qty|price|request_id|ts", and "|pay" for an
// instant-checkout order (seckill.PayCharged, seckill.PayHeld). One entry per call
// rather than per order keeps the script's writes to one XADD, whatever
// the batch.
func EncodeOutbox(evs []seckill.Event) map[string]any {
	lines := make([]string, len(evs))
	for i, e := range evs {
		lines[i] = e.OrderID + "|" + strconv.FormatInt(e.SaleID, 10) + "|" + e.UserID + "|" + strconv.FormatInt(e.Qty, 10) +
			"|" + strconv.FormatInt(e.PriceCents, 10) + "|" + e.RequestID + "|" + strconv.FormatInt(e.At, 10)
		if e.Pay != "" {
			lines[i] += "|" + e.Pay
		}
	}
	return map[string]any{outboxField: strings.Join(lines, "\n")}
}

// DecodeOutbox reads the fields of an outbox stream entry (see
// EncodeOutbox) as the events it carries.
func DecodeOutbox(values map[string]any) ([]seckill.Event, error) {
	s, _ := values[outboxField].(string)
	if s == "" {
		return nil, fmt.Errorf("%w: outbox entry %v is not an order event", errFormat, values)
	}
	lines := strings.Split(s, "\n")
	evs := make([]seckill.Event, len(lines))
	for i, line := range lines {
		p := strings.Split(line, "|")
		if len(p) != 7 && len(p) != 8 {
			return nil, fmt.Errorf("%w: outbox line %q is not an order event", errFormat, line)
		}
		ev := seckill.Event{OrderID: p[0], UserID: p[2], RequestID: p[5]}
		if len(p) == 8 {
			ev.Pay = p[7]
		}
		var errs [4]error
		ev.SaleID, errs[0] = strconv.ParseInt(p[1], 10, 64)
		ev.Qty, errs[1] = strconv.ParseInt(p[3], 10, 64)
		ev.PriceCents, errs[2] = strconv.ParseInt(p[4], 10, 64)
		ev.At, errs[3] = strconv.ParseInt(p[6], 10, 64)
		if err := errors.Join(errs[:]...); err != nil {
			return nil, fmt.Errorf("%w: outbox line %q: %w", errFormat, line, err)
		}
		evs[i] = ev
	}
	return evs, nil
}

// decodeReply reads the reply of release.lua, restock.lua, status.lua or
// accept.lua: "code|value|…" with n values.
func decodeReply(reply string, n int) (seckill.Code, []string, error) {
	f := strings.Split(reply, "|")
	c, ok := seckill.ParseCode(f[0])
	if !ok || len(f) != n+1 {
		return "", nil, fmt.Errorf("%w: reply %q", errFormat, reply)
	}
	return c, f[1:], nil
}

// stockFields are the fields of a stock hash that decodeStock reads, in
// its order.
var stockFields = []string{"total", "available", "sold", "limit", "price", "start", "end", "status", "ticket", "pow", "verified", "room", "qopen", "rate", "merchant", "instant"}

// decodeStock reads the values of stockFields (HMGET); ok is false when
// the hash does not exist.
func decodeStock(v []any) (st seckill.Stock, ok bool) {
	if len(v) != len(stockFields) || v[0] == nil {
		return st, false
	}
	return seckill.Stock{
		Total: toInt(v[0]), Available: toInt(v[1]), Sold: toInt(v[2]), Limit: toInt(v[3]), PriceCents: toInt(v[4]),
		Start: time.UnixMilli(toInt(v[5])), End: time.UnixMilli(toInt(v[6])),
		Status: seckill.Status(fmt.Sprint(v[7])), RequireTicket: v[8] == "1", PowDifficulty: int(toInt(v[9])),
		VerifiedOnly: v[10] == "1", WaitingRoom: v[11] == "1", QueueOpensAt: time.UnixMilli(toInt(v[12])),
		AdmitPerSecond: toInt(v[13]), MerchantID: merchantOf(v[14]), Instant: v[15] == "1",
	}, true
}

// merchantOf reads a stock hash's merchant field: -1 in a hash warmed
// before it was kept.
func merchantOf(v any) int64 {
	if v == nil {
		return -1
	}
	return toInt(v)
}

// warmArgs are warm.lua's arguments (its ARGV, in order).
type warmArgs struct {
	total, sold, limit int64
	start, end         time.Time
	status             seckill.Status
	price              int64
	// expireAt is when the part's keys go away; zero keeps them.
	expireAt time.Time
	// reset overwrites the counters of an existing part.
	reset bool
	parts int
	// tags lists the other parts' tags, on the first part only.
	tags          string
	ticket        bool
	powDifficulty int
	verifiedOnly  bool
	// The waiting room's settings.
	room      bool
	queueOpen time.Time
	rate      int64
	merchant  int64
	instant   bool
}

func (w warmArgs) args() []any {
	var exp int64
	if !w.expireAt.IsZero() {
		exp = w.expireAt.UnixMilli()
	}
	return []any{w.total, w.sold, w.limit, w.start.UnixMilli(), w.end.UnixMilli(), string(w.status), w.price, exp,
		flag(w.reset), w.parts, w.tags, flag(w.ticket), w.powDifficulty, flag(w.verifiedOnly),
		flag(w.room), w.queueOpen.UnixMilli(), w.rate, w.merchant, flag(w.instant)}
}

func flag(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// decodeMove reads a moves hash value as move.lua writes it:
// "destination tag|units".
func decodeMove(v string) (tag string, units int64, err error) {
	tag, n, ok := strings.Cut(v, "|")
	units, err = strconv.ParseInt(n, 10, 64)
	if !ok || err != nil || tag == "" {
		return "", 0, fmt.Errorf("%w: move %q", errFormat, v)
	}
	return tag, units, nil
}

// encodeChallenge writes a proof-of-work challenge as kept for its user:
// "challenge|difficulty".
func encodeChallenge(ch string, difficulty int) string { return ch + "|" + strconv.Itoa(difficulty) }

// decodeChallenge reads what encodeChallenge wrote.
func decodeChallenge(v string) (ch string, difficulty int, err error) {
	ch, n, ok := strings.Cut(v, "|")
	difficulty, err = strconv.Atoi(n)
	if !ok || err != nil {
		return "", 0, fmt.Errorf("%w: challenge %q", errFormat, v)
	}
	return ch, difficulty, nil
}

// toInt reads an integer reply that Redis may give as a number or a string.
func toInt(v any) int64 {
	switch x := v.(type) {
	case int64:
		return x
	case string:
		n, _ := strconv.ParseInt(x, 10, 64)
		return n
	}
	return 0
}
