package server

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/seckill/seckill"
	"github.com/seckill/seckill/payments"
)

// Payments is the payments service (package payments) as the server
// calls it: wallets, statements and the operator's credits.
type Payments interface {
	Wallet(ctx context.Context, user string) (payments.Balance, error)
	Transfers(ctx context.Context, user, before string, limit int) ([]seckill.StatementLine, error)
	AccountBalance(ctx context.Context, merchant int64) (payments.Balance, error)
	AccountStatement(ctx context.Context, merchant int64, before string, limit int) ([]seckill.StatementLine, error)
	Credit(ctx context.Context, user, requestID, reason string, amount int64) (seckill.Transfer, error)
}

// transferJSON is a transfer as the API shows it (API.md, Funds), with
// the balance after it of the account whose statement it is in.
type transferJSON struct {
	ID           string               `json:"id"`
	At           time.Time            `json:"at"`
	Kind         seckill.TransferKind `json:"kind"`
	AmountCents  int64                `json:"amount_cents"`
	Debit        seckill.FundsAccount `json:"debit"`
	Credit       seckill.FundsAccount `json:"credit"`
	OrderID      string               `json:"order_id,omitempty"`
	TopupID      string               `json:"topup_id,omitempty"`
	PayoutID     string               `json:"payout_id,omitempty"`
	BalanceAfter *int64               `json:"balance_after_cents,omitempty"`
}

func transferView(t seckill.Transfer) transferJSON {
	return transferJSON{ID: t.ID, At: t.At.UTC(), Kind: t.Kind, AmountCents: t.Amount, Debit: t.Debit, Credit: t.Credit,
		OrderID: t.OrderID, TopupID: t.TopupID, PayoutID: t.PayoutID}
}

// balanceJSON is an account's balance as the API shows it.
type balanceJSON struct {
	Account      seckill.FundsAccount `json:"account,omitempty"`
	BalanceCents int64                `json:"balance_cents"`
	HeldCents    *int64               `json:"held_cents,omitempty"`
	Currency     string               `json:"currency"`
}

// wallet answers GET /api/wallet: the caller's balance.
func (s *Server) wallet(c *gin.Context) {
	b, err := s.Payments.Wallet(c.Request.Context(), currentUser(c).ID)
	if err != nil {
		abort(c, err)
		return
	}
	c.JSON(http.StatusOK, balanceJSON{BalanceCents: b.Cents, HeldCents: &b.Held, Currency: b.Currency})
}

// page reads a statement's before_id and limit.
func page(c *gin.Context) (before string, limit int, err error) {
	before = c.Query("before_id")
	if len(before) > seckill.MaxTransferID {
		return "", 0, seckill.Invalid(seckill.FieldError{Field: "before_id", Message: "is not a transfer id"})
	}
	limit = payments.DefaultPage
	if v := c.Query("limit"); v != "" {
		if limit, err = strconv.Atoi(v); err != nil || limit < 1 || limit > payments.MaxPage {
			return "", 0, seckill.Invalid(seckill.FieldError{Field: "limit", Message: "must be 1 to " + strconv.Itoa(payments.MaxPage)})
		}
	}
	return before, limit, nil
}

// writeStatement answers a statement page, with the before_id of the next
// page when this one is full.
func writeStatement(c *gin.Context, lines []seckill.StatementLine, limit int, err error) {
	if err != nil {
		abort(c, err)
		return
	}
	out := make([]transferJSON, len(lines))
	for i, l := range lines {
		out[i] = transferView(l.Transfer)
		out[i].BalanceAfter = &l.BalanceAfter
	}
	body := gin.H{"transfers": out}
	if len(lines) == limit {
		body["next_before_id"] = lines[len(lines)-1].ID
	}
	c.JSON(http.StatusOK, body)
}

// walletTransfers answers GET /api/wallet/transfers: the caller's
// statement, newest first.
func (s *Server) walletTransfers(c *gin.Context) {
	before, limit, err := page(c)
	if err != nil {
		abort(c, err)
		return
	}
	lines, err := s.Payments.Transfers(c.Request.Context(), currentUser(c).ID, before, limit)
	writeStatement(c, lines, limit, err)
}

// merchantParam reads ?merchant_id= (0 when absent).
func merchantParam(c *gin.Context) (int64, error) {
	v := c.Query("merchant_id")
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 1 {
		return 0, seckill.Invalid(seckill.FieldError{Field: "merchant_id", Message: "must be a positive integer"})
	}
	return n, nil
}

// accountBalance answers GET /admin/api/balance: a merchant's own; the
// operator's choice of a merchant's (merchant_id) or the platform's.
func (s *Server) accountBalance(c *gin.Context) {
	m, err := merchantParam(c)
	if err != nil {
		abort(c, err)
		return
	}
	b, err := s.Payments.AccountBalance(c.Request.Context(), m)
	if err != nil {
		abort(c, err)
		return
	}
	c.JSON(http.StatusOK, balanceJSON{Account: b.Account, BalanceCents: b.Cents, Currency: b.Currency})
}

// accountTransfers answers GET /admin/api/transfers: the statement of the
// account accountBalance shows.
func (s *Server) accountTransfers(c *gin.Context) {
	m, err := merchantParam(c)
	if err != nil {
		abort(c, err)
		return
	}
	before, limit, err := page(c)
	if err != nil {
		abort(c, err)
		return
	}
	lines, err := s.Payments.AccountStatement(c.Request.Context(), m, before, limit)
	writeStatement(c, lines, limit, err)
}

type creditRequest struct {
	AmountCents int64  `json:"amount_cents"`
	Reason      string `json:"reason"`
	RequestID   string `json:"request_id"`
}

// creditWallet answers POST /admin/api/wallets/{user_id}/credit: the
// operator's goodwill from the platform's account.
func (s *Server) creditWallet(c *gin.Context) {
	var req creditRequest
	if err := decode(c, &req); err != nil {
		abort(c, err)
		return
	}
	t, err := s.Payments.Credit(c.Request.Context(), c.Param("user_id"), req.RequestID, req.Reason, req.AmountCents)
	if err != nil {
		abort(c, err)
		return
	}
	c.JSON(http.StatusCreated, transferView(t))
}

// Topups are a shopper's top-ups and the provider's webhooks (package
// payments).
type Topups interface {
	StartTopup(ctx context.Context, user, requestID string, amount int64) (seckill.Topup, error)
	TopupOf(ctx context.Context, user, id string) (seckill.Topup, error)
	Webhook(ctx context.Context, payload []byte, header string) error
	TestPage(ctx context.Context, id string) (seckill.Topup, error)
	TestPay(ctx context.Context, id string, paid bool) (seckill.Topup, error)
}

type topupRequest struct {
	AmountCents int64  `json:"amount_cents"`
	RequestID   string `json:"request_id"`
}

// startTopup answers POST /api/wallet/topups: the top-up, pending, and
// the page to pay it at.
func (s *Server) startTopup(c *gin.Context) {
	var req topupRequest
	if err := decode(c, &req); err != nil {
		abort(c, err)
		return
	}
	t, err := s.Topups.StartTopup(c.Request.Context(), currentUser(c).ID, req.RequestID, req.AmountCents)
	if err != nil {
		abort(c, err)
		return
	}
	c.JSON(http.StatusCreated, gin.H{"topup_id": t.ID, "status": t.Status, "amount_cents": t.Amount, "checkout_url": t.CheckoutURL})
}

// getTopup answers GET /api/wallet/topups/{id}: one of the caller's.
func (s *Server) getTopup(c *gin.Context) {
	t, err := s.Topups.TopupOf(c.Request.Context(), currentUser(c).ID, c.Param("id"))
	if err != nil {
		abort(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"topup_id": t.ID, "amount_cents": t.Amount, "currency": t.Currency, "status": t.Status})
}

// webhookBodyLimit bounds a provider's event (Stripe's are a few KB).
const webhookBodyLimit = 64 << 10

// paymentWebhook answers POST /api/payments/webhook: the provider's
// event, checked on its raw bytes and its Stripe-Signature header; 200
// once handled (again for a repeated event, which changes nothing).
func (s *Server) paymentWebhook(c *gin.Context) {
	body, err := io.ReadAll(c.Request.Body)
	if err != nil {
		err = readError(err)
	} else {
		err = s.Topups.Webhook(c.Request.Context(), body, c.GetHeader("Stripe-Signature"))
	}
	s.metrics.webhooks.WithLabelValues(outcome(c, err)).Inc()
	if err != nil {
		abort(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"received": true})
}

// Refunds are the admin's refunds of paid orders (package payments).
type Refunds interface {
	Refund(ctx context.Context, id, reason string) (seckill.Order, error)
}

type refundRequest struct {
	Reason string `json:"reason"`
}

// refundOrder answers POST /admin/api/orders/{id}/refund: the sale's
// merchant or the operator refunds a paid order, once.
func (s *Server) refundOrder(c *gin.Context) {
	var req refundRequest
	if err := decode(c, &req); err != nil {
		abort(c, err)
		return
	}
	o, err := s.Refunds.Refund(c.Request.Context(), c.Param("id"), req.Reason)
	if err != nil {
		abort(c, err)
		return
	}
	c.JSON(http.StatusOK, orderView(o))
}

// Payouts are a merchant's payouts to its bank (package payments).
type Payouts interface {
	Payout(ctx context.Context, requestID, code string, amount int64) (seckill.Payout, error)
}

type payoutRequest struct {
	AmountCents int64  `json:"amount_cents"`
	RequestID   string `json:"request_id"`
	// Code is the second factor's current code, once the merchant enrolled one.
	Code string `json:"totp"`
}

// payoutJSON is a payout as the API shows it.
type payoutJSON struct {
	ID          string               `json:"payout_id"`
	Status      seckill.PayoutStatus `json:"status"`
	AmountCents int64                `json:"amount_cents"`
	ProviderRef string               `json:"provider_ref,omitempty"`
	CreatedAt   time.Time            `json:"created_at"`
}

// payout answers POST /admin/api/payouts: the signed-in merchant's money
// to its bank; a retry answers the same payout as it stands now (201, as
// a top-up's or a credit's retry).
func (s *Server) payout(c *gin.Context) {
	var req payoutRequest
	if err := decode(c, &req); err != nil {
		abort(c, err)
		return
	}
	p, err := s.Payouts.Payout(c.Request.Context(), req.RequestID, req.Code, req.AmountCents)
	if err != nil {
		abort(c, err)
		return
	}
	c.JSON(http.StatusCreated, payoutJSON{ID: p.ID, Status: p.Status, AmountCents: p.Amount, ProviderRef: p.ProviderRef, CreatedAt: p.CreatedAt.UTC()})
}
