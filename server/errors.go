package server

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"
	"golang.org/x/text/language"

	"github.com/seckill/seckill"
	"github.com/seckill/seckill/locale"
)

// answer is a refusal as the API sends it (API.md, Errors): its code and
// the code's HTTP status, message, the fields at fault, and Retry-After.
type answer struct {
	code       seckill.Code
	status     int
	message    string
	fields     []seckill.FieldError
	retryAfter time.Duration
	// body is the encoded body, when built in advance.
	body []byte
}

// newAnswer is the refusal of code with a message: a 503 says to retry in
// a second (a backing service failing over or back soon).
func newAnswer(code seckill.Code, message string, fields []seckill.FieldError) *answer {
	a := &answer{code: code, status: code.HTTPStatus(), message: message, fields: fields}
	if code == seckill.CodeUnavailable {
		a.retryAfter = time.Second
	}
	return a
}

func (a *answer) Error() string { return string(a.code) + ": " + a.message }

// in is a in tag's language: a code's table message becomes its
// catalogue's, and so do the fields' messages (locale.Field), the
// message that joins them too; a message of a refusal's own stays as it
// is. The code never changes.
func (a *answer) in(tag language.Tag) *answer {
	if a == codeAnswers[a.code] { // a table answer: built for each language
		if l, ok := localAnswers[tag][a.code]; ok {
			return l
		}
	}
	return a.translated(tag)
}

// translated is a copy of a in tag's language (in's work), its body to
// be encoded.
func (a *answer) translated(tag language.Tag) *answer {
	t := *a
	if a.message == a.code.Message() {
		msg, ok := locale.Message(tag, locale.CodeKey(string(a.code)))
		if !ok {
			return a
		}
		t.message = msg
	}
	if len(a.fields) > 0 {
		joined := a.message == seckill.Invalid(a.fields...).Message
		t.fields = make([]seckill.FieldError, len(a.fields))
		for i, f := range a.fields {
			t.fields[i] = seckill.FieldError{Field: f.Field, Message: locale.Field(tag, f.Message)}
		}
		if joined {
			t.message = seckill.Invalid(t.fields...).Message
		}
	}
	t.body = nil
	return &t
}

// retrier is a refusal that says when to try again (a live-stock
// connection cap's).
type retrier interface{ RetryAfter() time.Duration }

func invalid(format string, args ...any) error {
	return seckill.Errorf(seckill.CodeInvalid, format, args...)
}

// codeAnswers are the answers of each code with its table message, built
// once with their bodies encoded: refusals are most of what a flash sale
// answers. Shared: never changed.
var codeAnswers = func() map[seckill.Code]*answer {
	m := map[seckill.Code]*answer{}
	for _, c := range seckill.Codes() {
		a := newAnswer(c, c.Message(), nil)
		a.body, _ = json.Marshal(errorBody{Error: errorDetail{Code: c, Message: a.message}})
		m[c] = a
	}
	return m
}()

// localAnswers are codeAnswers in each other language, their bodies
// encoded once too.
var localAnswers = func() map[language.Tag]map[seckill.Code]*answer {
	m := map[language.Tag]map[seckill.Code]*answer{}
	for _, tag := range locale.Tags[1:] {
		m[tag] = map[seckill.Code]*answer{}
		for c, a := range codeAnswers {
			l := a.translated(tag)
			if l != a { // the catalogue has it
				l.body, _ = json.Marshal(errorBody{Error: errorDetail{Code: c, Message: l.message}})
			}
			m[tag][c] = l
		}
	}
	return m
}()

// answerOf is the answer of a code with its table message.
func answerOf(c seckill.Code) *answer {
	if a, ok := codeAnswers[c]; ok {
		return a
	}
	return codeAnswers[seckill.CodeInternal]
}

// toAnswer turns any error into the refusal to send: an answer as it is,
// a seckill.Error with its own message (and, wrapped in an error that
// says when to retry, its Retry-After), else the table's answer for the
// error's code (internal for an error of no code, whose text never
// reaches the user).
func toAnswer(err error) *answer {
	switch e := err.(type) { // the common ones as they come, before errors.As reflects
	case *answer:
		return e
	case *seckill.Error:
		return newAnswer(e.Code, e.Message, e.Fields)
	}
	var e *seckill.Error
	if errors.As(err, &e) {
		a := newAnswer(e.Code, e.Message, e.Fields)
		var r retrier
		if errors.As(err, &r) {
			a.retryAfter = r.RetryAfter()
		}
		return a
	}
	return answerOf(seckill.CodeOf(err))
}

// answerFor is the refusal to answer err with: toAnswer's, unless the
// client has gone and err is just what its leaving caused.
func answerFor(c *gin.Context, err error) *answer {
	if errors.Is(err, context.Canceled) && c.Request.Context().Err() != nil {
		return answerOf(seckill.CodeClientCancelled)
	}
	return toAnswer(err)
}

// abort answers the request with err in the API's error body. Only 5xx are
// logged, with the internal error that never reaches the user: a 503 (a
// service down or failing over, which clients retry) as a warning. A
// client that went away gets nothing (its status is logged as 499).
func abort(c *gin.Context, err error) {
	sendAnswer(c, answerFor(c, err), err)
}

func sendAnswer(c *gin.Context, a *answer, err error) {
	if tag := locale.Of(c.GetHeader("Accept-Language")); tag != locale.Default {
		a = a.in(tag)
	}
	if a.code == seckill.CodeClientCancelled {
		slog.DebugContext(c.Request.Context(), "client went away", "route", c.FullPath(), "request_id", requestID(c))
		c.AbortWithStatus(a.status)
		return
	}
	switch status := a.status; {
	case status == http.StatusServiceUnavailable: // a backing service is down or failing over: retried
		slog.WarnContext(c.Request.Context(), "request failed", "err", err, "route", c.FullPath(), "request_id", requestID(c))
	case status >= 500:
		slog.ErrorContext(c.Request.Context(), "request failed", "err", err, "route", c.FullPath(), "request_id", requestID(c))
	}
	c.Abort()
	writeAnswer(c.Writer, a)
}

// jsonContentType is the Content-Type of every JSON answer, set as one
// shared value: Header.Set would canonicalise the name and allocate a
// slice per answer. net/http only reads it.
var jsonContentType = []string{"application/json; charset=utf-8"}

// writeAnswer writes a as the API's error body.
func writeAnswer(w http.ResponseWriter, a *answer) {
	h := w.Header()
	if a.retryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(int(math.Ceil(a.retryAfter.Seconds()))))
	}
	h["Content-Type"] = jsonContentType
	w.WriteHeader(a.status)
	if a.body != nil {
		_, _ = w.Write(a.body)
		return
	}
	_ = json.NewEncoder(w).Encode(errorBody{Error: errorDetail{Code: a.code, Message: a.message, Fields: a.fields}})
}

// errorBody is the JSON body of every refusal (API.md, Errors). A struct
// rather than nested maps: refusals (sold_out above all) are most of what a
// flash sale answers, and a map costs a dozen allocations per answer.
type errorBody struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Code    seckill.Code         `json:"code"`
	Message string               `json:"message"`
	Fields  []seckill.FieldError `json:"fields,omitempty"`
}

// rateLimited is the answer of a limiter that refuses for wait.
func rateLimited(message string, wait time.Duration) *answer {
	a := newAnswer(seckill.CodeRateLimited, message, nil)
	a.retryAfter = wait
	return a
}
