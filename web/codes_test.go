package web

import (
	"io/fs"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/seckill/seckill"
)

var (
	jsGroup   = regexp.MustCompile(`^export const (\w+) =`)
	jsMember  = regexp.MustCompile(`^\s*(\w+): "([a-z_]+)",`)
	jsLiteral = regexp.MustCompile(`(["'\x60])([a-z_]+)["'\x60]`)
	byCode    = regexp.MustCompile(`\[\s*\w+\.code\s*\]`)
)

// TestPagesNameCodesInOneModule: the outcome codes and the states (of a
// sale, a waiting room, an order, a top-up; the kinds of a transfer) the
// pages act on are named in codes.js only, each code one of the server's
// table (or one of the pages' own, in Local), each state one of the
// domain's; no other script spells one
// as a string or picks from a table keyed by them, so a renamed code
// cannot be missed in one place of many.
func TestPagesNameCodesInOneModule(t *testing.T) {
	src, err := fs.ReadFile(Static, "codes.js")
	if err != nil {
		t.Fatal(err)
	}
	words := map[string]bool{} // what codes.js names, which no other script may spell
	var group string
	for _, line := range strings.Split(string(src), "\n") {
		if m := jsGroup.FindStringSubmatch(line); m != nil {
			group = m[1]
		}
		m := jsMember.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		words[m[2]] = true
		_, isCode := seckill.ParseCode(m[2])
		switch {
		case group == "Code" && !isCode:
			t.Errorf("codes.js: Code.%s is %q, which the server's table lacks", m[1], m[2])
		case group == "Phase" && !slices.Contains(phases, seckill.Phase(m[2])):
			t.Errorf("codes.js: Phase.%s is %q, not a phase of a sale", m[1], m[2])
		case group == "QueueStatus" && !slices.Contains(queueStatuses, seckill.QueueStatus(m[2])):
			t.Errorf("codes.js: QueueStatus.%s is %q, not a status of a waiting room", m[1], m[2])
		case group == "OrderStatus" && !slices.Contains(orderStatuses, seckill.OrderStatus(m[2])):
			t.Errorf("codes.js: OrderStatus.%s is %q, not a status of an order", m[1], m[2])
		case group == "TransferKind" && !slices.Contains(transferKinds, seckill.TransferKind(m[2])):
			t.Errorf("codes.js: TransferKind.%s is %q, not a kind of transfer", m[1], m[2])
		case group == "TopupStatus" && !slices.Contains(topupStatuses, seckill.TopupStatus(m[2])):
			t.Errorf("codes.js: TopupStatus.%s is %q, not a status of a top-up", m[1], m[2])
		case group == "PayoutStatus" && !slices.Contains(payoutStatuses, seckill.PayoutStatus(m[2])):
			t.Errorf("codes.js: PayoutStatus.%s is %q, not a status of a payout", m[1], m[2])
		}
	}
	for _, c := range seckill.Codes() {
		words[string(c)] = true // a code the pages do not name yet must not be spelled either
	}
	for _, p := range phases {
		words[string(p)] = true
	}
	scripts, err := fs.Glob(Static, "*.js")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range scripts {
		if name == "codes.js" {
			continue
		}
		src, err := fs.ReadFile(Static, name)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(src), "\n") {
			if byCode.MatchString(line) {
				t.Errorf("%s:%d picks by a code from a table of literals: %s", name, i+1, strings.TrimSpace(line))
			}
			for _, m := range jsLiteral.FindAllStringSubmatch(line, -1) {
				if words[m[2]] {
					t.Errorf("%s:%d spells %q: name it from codes.js", name, i+1, m[2])
				}
			}
		}
	}
}

// queueStatuses are where a shopper stands in a waiting room.
var queueStatuses = []seckill.QueueStatus{seckill.QueueWaiting, seckill.QueueAdmitted, seckill.QueueSoldOut, seckill.QueueNotInQueue}

// phases are the states of a sale as shoppers see them.
var phases = []seckill.Phase{seckill.PhaseScheduled, seckill.PhaseActive, seckill.PhasePaused, seckill.PhaseSoldOut, seckill.PhaseEnded}

// orderStatuses, transferKinds, topupStatuses and payoutStatuses are the
// states of an order, the kinds of a statement's lines and the states of
// a top-up and of a payout.
var (
	orderStatuses = []seckill.OrderStatus{seckill.OrderPending, seckill.OrderPaid, seckill.OrderCancelled, seckill.OrderRefunded}
	transferKinds = []seckill.TransferKind{seckill.TransferTopup, seckill.TransferCharge, seckill.TransferFee, seckill.TransferRefund,
		seckill.TransferCredit, seckill.TransferPayout, seckill.TransferVoid}
	topupStatuses  = []seckill.TopupStatus{seckill.TopupPending, seckill.TopupSucceeded, seckill.TopupFailed}
	payoutStatuses = []seckill.PayoutStatus{seckill.PayoutPending, seckill.PayoutPaid, seckill.PayoutFailed}
)
