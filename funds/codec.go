package funds

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/seckill/seckill"
)

// errFormat is a record that is not what its codec writes.
var errFormat = errors.New("funds: malformed record")

// outboxField is the field of a funds outbox entry that holds its
// movement (EncodeMovement).
const outboxField = "e"

// EncodeMovement writes a movement as its outbox entry holds it: a first
// line "id|side", then a line per transfer,
// "id|kind|amount|debit|credit|order|topup|payout|at" (at in unix ms). No
// field holds a "|" or a line break (Movement.Validate and the ids'
// alphabets see to it; EncodeMovement refuses one that does).
func EncodeMovement(m seckill.Movement) (string, error) {
	var b strings.Builder
	fields := []string{m.ID, string(m.Side)}
	for _, t := range m.Transfers {
		fields = append(fields, t.ID, string(t.Kind), string(t.Debit), string(t.Credit), t.OrderID, t.TopupID, t.PayoutID)
	}
	for _, f := range fields {
		if strings.ContainsAny(f, "|\n\r") {
			return "", fmt.Errorf("%w: field %q of movement %s", errFormat, f, m.ID)
		}
	}
	b.WriteString(m.ID + "|" + string(m.Side))
	for _, t := range m.Transfers {
		b.WriteString("\n" + t.ID + "|" + string(t.Kind) + "|" + strconv.FormatInt(t.Amount, 10) + "|" + string(t.Debit) + "|" +
			string(t.Credit) + "|" + t.OrderID + "|" + t.TopupID + "|" + t.PayoutID + "|" + strconv.FormatInt(t.At.UnixMilli(), 10))
	}
	return b.String(), nil
}

// DecodeMovement reads EncodeMovement.
func DecodeMovement(s string) (seckill.Movement, error) {
	lines := strings.Split(s, "\n")
	head := strings.Split(lines[0], "|")
	if len(head) != 2 || len(lines) < 2 {
		return seckill.Movement{}, fmt.Errorf("%w: movement %q", errFormat, lines[0])
	}
	m := seckill.Movement{ID: head[0], Side: seckill.FundsAccount(head[1])}
	for _, line := range lines[1:] {
		f := strings.Split(line, "|")
		if len(f) != 9 {
			return seckill.Movement{}, fmt.Errorf("%w: transfer %q", errFormat, line)
		}
		amount, err1 := strconv.ParseInt(f[2], 10, 64)
		at, err2 := strconv.ParseInt(f[8], 10, 64)
		if err1 != nil || err2 != nil {
			return seckill.Movement{}, fmt.Errorf("%w: transfer %q", errFormat, line)
		}
		m.Transfers = append(m.Transfers, seckill.Transfer{ID: f[0], Kind: seckill.TransferKind(f[1]), Amount: amount,
			Debit: seckill.FundsAccount(f[3]), Credit: seckill.FundsAccount(f[4]), OrderID: f[5], TopupID: f[6], PayoutID: f[7],
			At: time.UnixMilli(at).UTC()})
	}
	if err := m.Validate(); err != nil {
		return seckill.Movement{}, fmt.Errorf("%w: %w", errFormat, err)
	}
	return m, nil
}

// decodeReply reads a script's answer "code|balance|made".
func decodeReply(reply string) (code seckill.Code, balance int64, made bool, err error) {
	f := strings.Split(reply, "|")
	if len(f) != 3 {
		return "", 0, false, fmt.Errorf("%w: reply %q", errFormat, reply)
	}
	code, ok := seckill.ParseCode(f[0])
	balance, berr := strconv.ParseInt(f[1], 10, 64)
	if !ok || berr != nil {
		return "", 0, false, fmt.Errorf("%w: reply %q", errFormat, reply)
	}
	return code, balance, f[2] == "1", nil
}
