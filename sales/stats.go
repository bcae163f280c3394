package sales

import (
	"context"

	"github.com/seckill/seckill"
)

// Stats are a sale's figures for the merchant's dashboard.
type Stats struct {
	View   View
	Totals seckill.Totals
	// Outcomes counts the buys' answers by code (ok, sold_out,
	// limit_exceeded and rate_limited always present), across every server
	// process as of its last flush.
	Outcomes map[string]int64
	Defence  Defence
	// Queue is the waiting room's figures; nil for a sale without one.
	Queue *QueueStats
}

// QueueStats are a waiting room's figures: its queue, the places admitted,
// how many joined before the start, and the admitted shoppers who bought
// (every buyer of a sale with a room used their pass).
type QueueStats struct {
	Size, Admitted, JoinedBeforeStart, PassesUsed int64
	AdmitPerSecond                                int64
}

// Defence is what a sale's bot defence saw (API.md, buy tickets): buys
// refused for a missing or bad ticket, challenges issued and solved, bad
// proofs, tickets issued, and the users first refused for their cap.
type Defence struct {
	TicketRequired, TicketInvalid      int64
	ChallengesIssued, ChallengesSolved int64
	PowInvalid, TicketsIssued          int64
	FirstCapped                        []seckill.CappedUser
}

// firstCappedShown is how many of the first capped users the stats show.
const firstCappedShown = 10

// Stats gathers a sale's figures from the ledger and Redis.
func (s *Service) Stats(ctx context.Context, id int64) (Stats, error) {
	v, err := s.Get(ctx, id)
	if err != nil {
		return Stats{}, err
	}
	st := Stats{View: v}
	if st.Totals, err = s.ledger.Totals(ctx, id); err != nil {
		return Stats{}, err
	}
	counts, err := s.stock.Outcomes(ctx, id)
	if err != nil {
		return Stats{}, err
	}
	st.Outcomes = map[string]int64{}
	for _, c := range []seckill.Code{seckill.CodeOK, seckill.CodeSoldOut, seckill.CodeLimitExceeded, seckill.CodeRateLimited} {
		st.Outcomes[string(c)] = 0
	}
	// The counts of other routes than buy go to the defence's figures.
	d := &st.Defence
	apart := map[string]*int64{ChallengeIssued: &d.ChallengesIssued, ChallengeSolved: &d.ChallengesSolved,
		string(seckill.CodePowInvalid): &d.PowInvalid, TicketIssued: &d.TicketsIssued}
	for name, n := range counts {
		if p, ok := apart[name]; ok {
			*p = n
			continue
		}
		st.Outcomes[name] = n
	}
	d.TicketRequired = st.Outcomes[string(seckill.CodeTicketRequired)]
	d.TicketInvalid = st.Outcomes[string(seckill.CodeTicketInvalid)]
	if d.FirstCapped, err = s.stock.FirstCapped(ctx, id, firstCappedShown); err != nil {
		return Stats{}, err
	}
	if v.Stock.WaitingRoom {
		now := s.now()
		q, err := s.stock.ReadQueue(ctx, id, "", now, v.Phase(now) == seckill.PhaseSoldOut)
		if err != nil {
			return Stats{}, err
		}
		used, err := s.stock.BuyerCount(ctx, id)
		if err != nil {
			return Stats{}, err
		}
		st.Queue = &QueueStats{Size: q.Size, Admitted: q.AdmittedThrough, JoinedBeforeStart: q.JoinedBeforeStart,
			PassesUsed: used, AdmitPerSecond: v.Stock.AdmitPerSecond}
	}
	return st, nil
}
