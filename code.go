package seckill

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// Code is an outcome code: what a buy was answered, or why any request was
// refused. It is the "code" of the API's error body (and "ok" for an
// accepted buy), the code the Lua scripts return, and the label of the
// outcome counters and metrics.
type Code string

// The codes. Each has one row in the table below.
const (
	CodeOK Code = "ok"

	CodeInvalid         Code = "invalid_request"
	CodeUnauthenticated Code = "unauthenticated"
	CodeForbidden       Code = "forbidden"
	CodeTicketRequired  Code = "ticket_required"
	CodeTicketInvalid   Code = "ticket_invalid"
	CodePowInvalid      Code = "pow_invalid"
	CodeNotEligible     Code = "not_eligible"
	CodePassRequired    Code = "pass_required"
	CodePassInvalid     Code = "pass_invalid"
	CodeEmailTaken      Code = "email_taken"
	CodeNotFound        Code = "not_found"
	CodeSaleNotFound    Code = "sale_not_found"
	CodeOrderNotFound   Code = "order_not_found"
	CodeRequestTimeout  Code = "request_timeout"
	CodeSoldOut         Code = "sold_out"
	CodeLimitExceeded   Code = "limit_exceeded"
	CodeNotStarted      Code = "not_started"
	CodeEnded           Code = "ended"
	CodePaused          Code = "paused"
	CodeOrderCancelled  Code = "order_cancelled"
	CodeOrderPaid       Code = "order_paid"
	CodeBodyTooLarge    Code = "body_too_large"
	CodeRateLimited     Code = "rate_limited"
	CodeClientCancelled Code = "client_cancelled"
	CodeInternal        Code = "internal"
	CodeUnavailable     Code = "unavailable"

	// CodeMethodNotAllowed is a known path asked with a method it does
	// not take: 405, the Allow header listing those it does.
	CodeMethodNotAllowed Code = "method_not_allowed"

	// Funds (API.md, Funds).
	CodeInsufficientFunds Code = "insufficient_funds"
	CodeBalanceLimit      Code = "balance_limit"
	CodeInvalidSignature  Code = "invalid_signature"
	CodeOrderRefunded     Code = "order_refunded"

	// CodeBucketEmpty is buy.lua's soft refusal on one bucket of a sale
	// with several: this bucket lacks the units, others may have them.
	// inventory moves units over and asks again; no client ever sees it.
	CodeBucketEmpty Code = "bucket_empty"
	// CodeHoldExpired refuses an instant-checkout buy whose wallet hold
	// lapsed before its stock step (a process died between the two).
	CodeHoldExpired Code = "hold_expired"
)

// The sentinel errors, one per code (CodeOK has none). Wrap them with %w;
// CodeOf finds the code of any error that wraps one.
var (
	ErrInvalid         = errors.New("invalid request")
	ErrUnauthenticated = errors.New("unauthenticated")
	ErrForbidden       = errors.New("forbidden")
	ErrTicketRequired  = errors.New("buy ticket required")
	ErrTicketInvalid   = errors.New("buy ticket invalid")
	ErrPowInvalid      = errors.New("proof of work invalid")
	ErrNotEligible     = errors.New("identity not verified")
	ErrPassRequired    = errors.New("admission pass required")
	ErrPassInvalid     = errors.New("admission pass invalid")
	ErrEmailTaken      = errors.New("email taken")
	ErrNotFound        = errors.New("no such route")
	ErrSaleNotFound    = errors.New("sale not found")
	ErrOrderNotFound   = errors.New("order not found")
	ErrRequestTimeout  = errors.New("request body too slow")
	ErrSoldOut         = errors.New("sold out")
	ErrLimitExceeded   = errors.New("per-user limit exceeded")
	ErrNotStarted      = errors.New("sale not started")
	ErrEnded           = errors.New("sale ended")
	ErrPaused          = errors.New("sale paused")
	ErrOrderCancelled  = errors.New("order cancelled")
	ErrOrderPaid       = errors.New("order paid")
	ErrBodyTooLarge    = errors.New("request body too large")
	ErrRateLimited     = errors.New("rate limited")
	ErrClientCancelled = errors.New("client went away")
	ErrInternal        = errors.New("internal error")
	ErrUnavailable     = errors.New("backing service unavailable")
	ErrBucketEmpty     = errors.New("bucket empty")
	ErrHoldExpired     = errors.New("wallet hold expired")

	ErrMethodNotAllowed = errors.New("method not allowed")

	ErrInsufficientFunds = errors.New("insufficient funds")
	ErrBalanceLimit      = errors.New("balance limit")
	ErrInvalidSignature  = errors.New("invalid signature")
	ErrOrderRefunded     = errors.New("order refunded")
)

// ErrPaymentExpired is an order still pending whose payment window has
// closed: paying it is refused as for a cancelled order, and the caller
// may cancel it.
var ErrPaymentExpired = fmt.Errorf("%w: payment window closed", ErrOrderCancelled)

// statusClientClosed is what logs and metrics show for a request whose
// client went away before its answer (nginx's 499); nothing is sent.
const statusClientClosed = 499

type codeRow struct {
	code    Code
	err     error
	status  int
	message string
}

// codeTable is the one table of outcomes: each code's sentinel, HTTP status
// and the message safe to show anyone. A refusal made with a message of its
// own (Errorf) still takes its status from here.
var codeTable = []codeRow{
	{CodeOK, nil, http.StatusOK, "Done."},
	{CodeSoldOut, ErrSoldOut, http.StatusConflict, "Sold out: not enough stock left for this quantity."},
	{CodeLimitExceeded, ErrLimitExceeded, http.StatusConflict, "That would take you over this sale's per-person limit."},
	{CodeNotStarted, ErrNotStarted, http.StatusConflict, "The sale has not started yet."},
	{CodeEnded, ErrEnded, http.StatusConflict, "The sale has ended."},
	{CodePaused, ErrPaused, http.StatusConflict, "The sale is paused by the merchant."},
	{CodeBucketEmpty, ErrBucketEmpty, http.StatusConflict, "Sold out: not enough stock left for this quantity."},
	{CodeHoldExpired, ErrHoldExpired, http.StatusConflict, "The payment for this buy lapsed before it was decided; nothing was charged: buy again with a new request id."},
	{CodeTicketRequired, ErrTicketRequired, http.StatusForbidden, "This sale needs a buy ticket with each buy: get one from POST /api/sales/{id}/ticket."},
	{CodeTicketInvalid, ErrTicketInvalid, http.StatusForbidden, "The buy ticket is expired, forged, or not yours for this sale: get a new one."},
	{CodePowInvalid, ErrPowInvalid, http.StatusForbidden, "The proof of work is missing, wrong, expired or already used: get a new challenge."},
	{CodeNotEligible, ErrNotEligible, http.StatusForbidden, "This sale sells only to verified shoppers: sign in with a verified account."},
	{CodePassRequired, ErrPassRequired, http.StatusForbidden, "This sale lets shoppers in through its waiting room: join the queue (POST /api/sales/{id}/queue) and buy with the pass it gives when your turn comes."},
	{CodePassInvalid, ErrPassInvalid, http.StatusForbidden, "The admission pass is expired, forged, or not yours for this sale: ask the waiting room for a new one (GET /api/sales/{id}/queue)."},
	{CodeEmailTaken, ErrEmailTaken, http.StatusConflict, "An account with this email already exists: sign in instead."},
	{CodeSaleNotFound, ErrSaleNotFound, http.StatusNotFound, "No such sale."},
	{CodeOrderNotFound, ErrOrderNotFound, http.StatusNotFound, "No such order."},
	{CodeOrderCancelled, ErrOrderCancelled, http.StatusConflict, "The order was cancelled: its payment window has closed."},
	{CodeOrderPaid, ErrOrderPaid, http.StatusConflict, "The order is paid and cannot be cancelled."},
	{CodeOrderRefunded, ErrOrderRefunded, http.StatusConflict, "The order was refunded."},
	{CodeInsufficientFunds, ErrInsufficientFunds, http.StatusPaymentRequired, "Your balance is too low for this: top up your wallet and try again."},
	{CodeBalanceLimit, ErrBalanceLimit, http.StatusConflict, "That would take the wallet over the most it may hold."},
	{CodeInvalidSignature, ErrInvalidSignature, http.StatusBadRequest, "The webhook's signature is missing, wrong, too old or too new."},
	{CodeInvalid, ErrInvalid, http.StatusBadRequest, "The request is not valid."},
	{CodeUnauthenticated, ErrUnauthenticated, http.StatusUnauthorized, "Sign in first."},
	{CodeForbidden, ErrForbidden, http.StatusForbidden, "Not allowed."},
	{CodeNotFound, ErrNotFound, http.StatusNotFound, "No such page or endpoint."},
	{CodeMethodNotAllowed, ErrMethodNotAllowed, http.StatusMethodNotAllowed, "This endpoint does not take this method: the Allow header lists those it does."},
	{CodeRequestTimeout, ErrRequestTimeout, http.StatusRequestTimeout, "The request body arrived too slowly."},
	{CodeBodyTooLarge, ErrBodyTooLarge, http.StatusRequestEntityTooLarge, "The request body is too large."},
	{CodeRateLimited, ErrRateLimited, http.StatusTooManyRequests, "Too many requests; retry in a moment."},
	{CodeClientCancelled, ErrClientCancelled, statusClientClosed, "The client went away."},
	{CodeUnavailable, ErrUnavailable, http.StatusServiceUnavailable, "The service could not finish this just now; please retry shortly (a buy with the same request_id)."},
	{CodeInternal, ErrInternal, http.StatusInternalServerError, "Something went wrong on our side."},
}

var codeIndex = func() map[Code]int {
	m := make(map[Code]int, len(codeTable))
	for i, r := range codeTable {
		if _, dup := m[r.code]; dup {
			panic("seckill: code " + string(r.code) + " twice in the table")
		}
		m[r.code] = i
	}
	return m
}()

// Codes lists every code of the table, in its order.
func Codes() []Code {
	out := make([]Code, len(codeTable))
	for i, r := range codeTable {
		out[i] = r.code
	}
	return out
}

// ParseCode returns the code named s, and whether the table has it.
func ParseCode(s string) (Code, bool) {
	_, ok := codeIndex[Code(s)]
	return Code(s), ok
}

func (c Code) row() codeRow {
	if i, ok := codeIndex[c]; ok {
		return codeTable[i]
	}
	return codeTable[codeIndex[CodeInternal]]
}

// Err is the code's sentinel error (nil for CodeOK; ErrInternal for a code
// the table lacks).
func (c Code) Err() error { return c.row().err }

// HTTPStatus is the HTTP status the code is answered with.
func (c Code) HTTPStatus() int { return c.row().status }

// Message is the code's message, safe to show anyone.
func (c Code) Message() string { return c.row().message }

// CodeOf returns the code of err: CodeOK for nil, the code of the sentinel
// it is or wraps, the Code of an *Error in its chain, and CodeInternal for
// anything else.
func CodeOf(err error) Code {
	if err == nil {
		return CodeOK
	}
	// The sentinels as they come first: a sold-out refusal is most of what
	// a flash sale answers, and errors.As allocates and reflects.
	for _, r := range codeTable {
		if err == r.err {
			return r.code
		}
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	for _, r := range codeTable {
		if r.err != nil && errors.Is(err, r.err) {
			return r.code
		}
	}
	return CodeInternal
}

// Error is a refusal with a message of its own, more precise than its
// code's ("Field \"qty\" must be a whole number."). It is its code's
// sentinel for errors.Is.
type Error struct {
	Code    Code
	Message string
	// Fields lists what is wrong with each field of a request, if any.
	Fields []FieldError
}

// Errorf returns an *Error of code with a message made as fmt.Sprintf does.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

func (e *Error) Error() string { return string(e.Code) + ": " + e.Message }

// Is makes an *Error match its code's sentinel.
func (e *Error) Is(target error) bool { return target != nil && target == e.Code.Err() }

// FieldError is a setting that breaks a rule; Field is its JSON name.
type FieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

// Invalid returns the invalid_request refusal listing fields, its message
// the fields' joined.
func Invalid(fields ...FieldError) *Error {
	msgs := make([]string, len(fields))
	for i, f := range fields {
		msgs[i] = f.Field + ": " + f.Message
	}
	return &Error{Code: CodeInvalid, Message: strings.Join(msgs, "; "), Fields: fields}
}
