package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/inventory"
	"github.com/seckill/seckill/orders"
)

// Error is a refusal with its HTTP status and API code (API.md, Errors).
type Error struct {
	Status  int
	Code    string
	Message string
	// Fields lists field-level problems of a request body, if any.
	Fields []orders.FieldError
	// RetryAfter is sent as the Retry-After header of a 429 or 503.
	RetryAfter time.Duration
	// body is the answer's encoded body, when built in advance.
	body []byte
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

func newError(status int, code, format string, args ...any) *Error {
	return &Error{Status: status, Code: code, Message: fmt.Sprintf(format, args...)}
}

func invalid(format string, args ...any) *Error {
	return newError(http.StatusBadRequest, "invalid_request", format, args...)
}

// errorTable maps domain errors to what the API answers. The first match
// (errors.Is) wins.
var errorTable = []struct {
	err    error
	status int
	code   string
	msg    string
}{
	{inventory.ErrSoldOut, http.StatusConflict, "sold_out", "Sold out: not enough stock left for this quantity."},
	{inventory.ErrLimitExceeded, http.StatusConflict, "limit_exceeded", "That would take you over this sale's per-person limit."},
	{inventory.ErrNotStarted, http.StatusConflict, "not_started", "The sale has not started yet."},
	{inventory.ErrEnded, http.StatusConflict, "ended", "The sale has ended."},
	{inventory.ErrPaused, http.StatusConflict, "paused", "The sale is paused by the merchant."},
	{errTicketRequired, http.StatusForbidden, "ticket_required", "This sale needs a buy ticket with each buy: get one from POST /api/sales/{id}/ticket."},
	{errTicketInvalid, http.StatusForbidden, "ticket_invalid", "The buy ticket is expired, forged, or not yours for this sale: get a new one."},
	{errPowInvalid, http.StatusForbidden, "pow_invalid", "The proof of work is missing, wrong, expired or already used: get a new challenge."},
	{inventory.ErrSaleNotFound, http.StatusNotFound, "sale_not_found", "No such sale."},
	{orders.ErrSaleNotFound, http.StatusNotFound, "sale_not_found", "No such sale."},
	{orders.ErrNotFound, http.StatusNotFound, "order_not_found", "No such order."},
	{orders.ErrCancelled, http.StatusConflict, "order_cancelled", "The order was cancelled: its payment window has closed."},
	{orders.ErrExpired, http.StatusConflict, "order_cancelled", "The order's payment window has closed."},
	{orders.ErrPaid, http.StatusConflict, "order_paid", "The order is paid and cannot be cancelled."},
	{inventory.ErrNotDurable, http.StatusServiceUnavailable, "unavailable", "Your purchase could not be confirmed yet; retry with the same request_id."},
	{errUnavailable, http.StatusServiceUnavailable, "unavailable", "The service is busy or a backing service is down; please retry shortly."},
}

// tableAnswers are errorTable's answers, built once with their bodies
// encoded: refusals are most of what a flash sale answers. Shared: never
// changed.
var tableAnswers = func() []*Error {
	out := make([]*Error, len(errorTable))
	for i, row := range errorTable {
		e := &Error{Status: row.status, Code: row.code, Message: row.msg}
		if row.status == http.StatusServiceUnavailable {
			e.RetryAfter = time.Second
		}
		e.body, _ = json.Marshal(errorBody{Error: errorDetail{Code: e.Code, Message: e.Message}})
		out[i] = e
	}
	return out
}()

// errUnavailable marks failures of a backing service (Redis, MySQL,
// RabbitMQ) that a retry may get past.
var errUnavailable = errors.New("backing service unavailable")

// unavailable wraps err as a 503.
func unavailable(err error) error { return fmt.Errorf("%w: %w", errUnavailable, err) }

// toError turns any error into the API refusal to send.
func toError(err error) *Error {
	// The sentinels as they come first: a sold-out buy's refusal is most
	// of what a flash sale answers, and errors.As allocates and reflects.
	if e, ok := err.(*Error); ok {
		return e
	}
	for i, row := range errorTable {
		if err == row.err {
			return tableAnswers[i]
		}
	}
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	var ve *orders.ValidationError
	if errors.As(err, &ve) {
		e := invalid("%s", ve.Error())
		e.Fields = ve.Fields
		return e
	}
	for i, row := range errorTable {
		if errors.Is(err, row.err) {
			return tableAnswers[i]
		}
	}
	return &Error{Status: http.StatusInternalServerError, Code: "internal", Message: "Something went wrong on our side."}
}

// statusClientGone is what the logs and metrics show for a request whose
// client went away before its answer (nginx's 499); nothing is sent.
const statusClientGone = 499

var errClientGone = &Error{Status: statusClientGone, Code: "client_cancelled", Message: "The client went away."}

// errorOf is the refusal to answer err with: toError's, unless the client
// has gone and err is just what its leaving caused.
func errorOf(c *gin.Context, err error) *Error {
	if errors.Is(err, context.Canceled) && c.Request.Context().Err() != nil {
		return errClientGone
	}
	return toError(err)
}

// abort answers the request with err in the API's error body. Only 5xx are
// logged, with the internal error that never reaches the user: a 503 (a
// service down or failing over, which clients retry) as a warning.
func abort(c *gin.Context, err error) {
	e := errorOf(c, err)
	if e == errClientGone {
		slog.DebugContext(c.Request.Context(), "client went away", "route", c.FullPath(), "request_id", requestID(c))
		c.AbortWithStatus(statusClientGone)
		return
	}
	switch {
	case e.Status == http.StatusServiceUnavailable: // a backing service is down or failing over: retried
		slog.WarnContext(c.Request.Context(), "request failed", "err", err, "route", c.FullPath(), "request_id", requestID(c))
	case e.Status >= 500:
		slog.ErrorContext(c.Request.Context(), "request failed", "err", err, "route", c.FullPath(), "request_id", requestID(c))
	}
	c.Abort()
	writeError(c.Writer, e)
}

// jsonContentType is the Content-Type of every JSON answer, set as one
// shared value: Header.Set would canonicalise the name and allocate a
// slice per answer. net/http only reads it.
var jsonContentType = []string{"application/json; charset=utf-8"}

// writeError writes e as the API's error body.
func writeError(w http.ResponseWriter, e *Error) {
	h := w.Header()
	if e.RetryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(int(math.Ceil(e.RetryAfter.Seconds()))))
	}
	h["Content-Type"] = jsonContentType
	w.WriteHeader(e.Status)
	if e.body != nil {
		_, _ = w.Write(e.body)
		return
	}
	_ = json.NewEncoder(w).Encode(errorBody{Error: errorDetail{Code: e.Code, Message: e.Message, Fields: e.Fields}})
}

// errorBody is the JSON body of every refusal (API.md, Errors). A struct
// rather than nested maps: refusals (sold_out above all) are most of what a
// flash sale answers, and a map costs a dozen allocations per answer.
type errorBody struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Code    string              `json:"code"`
	Message string              `json:"message"`
	Fields  []orders.FieldError `json:"fields,omitempty"`
}

// classify marks errors of a backing service that a retry may get past
// (connection refused or lost, timeouts, lock waits) as 503; domain errors
// and anything else pass unchanged.
func classify(err error) error {
	if err == nil || errors.Is(err, errUnavailable) {
		return err
	}
	if orders.Transient(err) || inventory.Redirected(err) || errors.Is(err, redis.ErrPoolTimeout) || errors.Is(err, redis.ErrClosed) {
		return unavailable(err)
	}
	return err
}

func isNotFound(err error) bool {
	return errors.Is(err, orders.ErrSaleNotFound) || errors.Is(err, orders.ErrNotFound)
}
