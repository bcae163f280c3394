package server

import (
	"bytes"
	"errors"
	"io"
	"mime"
	"net/http"
	"os"
	"reflect"
	"strconv"
	"strings"
	"sync"

	"github.com/gin-gonic/gin"
	json "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/seckill/seckill"
	"github.com/seckill/seckill/tickets"
)

// decode reads the request body, which must be application/json holding
// one JSON object, into dst. It is stricter than encoding/json, which a
// proxy in front of the server may not be: member names match dst's json
// names exactly (case included), and unknown, duplicated or null members,
// wrong types, invalid UTF-8, trailing data and bodies over the limit are
// refused. Otherwise {"qty":1,"Qty":3} could mean 1 to whatever checks the
// request and 3 to the server.
func decode(c *gin.Context, dst any) error {
	body, err := jsonBody(c)
	if err != nil {
		return err
	}
	if err := checkMembers(body); err != nil {
		return err
	}
	if err := json.Unmarshal(body, dst, json.RejectUnknownMembers(true)); err != nil {
		return decodeError(err)
	}
	return nil
}

// jsonBody reads the request body, which must be application/json.
func jsonBody(c *gin.Context) ([]byte, error) {
	if ct := c.GetHeader("Content-Type"); ct != "application/json" { // the common case needs no parsing
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
			return nil, invalid("Content-Type must be application/json.")
		}
	}
	body, err := io.ReadAll(c.Request.Body)
	if err != nil {
		return nil, readError(err)
	}
	return body, nil
}

// openObject reads the '{' that must start a body.
func openObject(dec *jsontext.Decoder) error {
	tok, err := dec.ReadToken()
	switch {
	case errors.Is(err, io.EOF):
		return invalid("Request body is empty; a JSON object is expected.")
	case err != nil:
		return decodeError(err)
	case tok.Kind() != '{':
		return invalid("Request body must be a JSON object.")
	}
	return nil
}

// readError explains a body that could not be read.
func readError(err error) error {
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		return bodyTooLarge(tooLarge.Limit)
	case errors.Is(err, os.ErrDeadlineExceeded):
		return seckill.ErrRequestTimeout
	}
	return invalid("The request body could not be read.")
}

// unquote is the text of a JSON string the decoder has validated: without
// escapes it is what lies between the quotes (one allocation, not two).
func unquote(v jsontext.Value) (string, error) {
	if bytes.IndexByte(v, '\\') < 0 {
		return string(v[1 : len(v)-1]), nil
	}
	s, err := jsontext.AppendUnquote(nil, v)
	return string(s), err
}

// checkMembers makes sure the body is one JSON object whose members are
// not null (a null would read as "absent" and hide a client's mistake).
func checkMembers(body []byte) error {
	dec := jsontext.NewDecoder(bytes.NewReader(body))
	if err := openObject(dec); err != nil {
		return err
	}
	for dec.PeekKind() == '"' {
		tok, err := dec.ReadToken()
		if err != nil {
			return decodeError(err)
		}
		name := tok.String()
		if dec.PeekKind() == 'n' {
			return invalid("Field %q must not be null.", name)
		}
		if err := dec.SkipValue(); err != nil {
			return decodeError(err)
		}
	}
	return nil // the rest is checked as it is decoded
}

func decodeError(err error) error {
	var syn *jsontext.SyntacticError
	var sem *json.SemanticError
	switch {
	case errors.Is(err, jsontext.ErrDuplicateName) && errors.As(err, &syn):
		return invalid("Field %q appears more than once.", field(syn.JSONPointer))
	case errors.Is(err, json.ErrUnknownName) && errors.As(err, &sem):
		return invalid("Unknown field %q (field names are case-sensitive).", field(sem.JSONPointer))
	case errors.As(err, &sem) && sem.JSONPointer != "":
		name := field(sem.JSONPointer)
		switch {
		case sem.GoType != nil && sem.GoType.String() == "time.Time":
			return invalid("Field %q must be an RFC 3339 time, like 2026-11-29T20:00:00Z.", name)
		case sem.GoType != nil && sem.JSONKind == '0' && kindOf(sem.GoType) == "whole number":
			return invalid("Field %q must be a whole number in range.", name)
		case sem.GoType != nil:
			return invalid("Field %q must be a %s.", name, kindOf(sem.GoType))
		}
		return invalid("Field %q is not valid.", name)
	}
	return invalid("Request body is not valid JSON.")
}

// field names the top-level member a JSON pointer like "/qty" points into.
func field(p jsontext.Pointer) string {
	name, _, _ := strings.Cut(strings.TrimPrefix(string(p), "/"), "/")
	return strings.NewReplacer("~1", "/", "~0", "~").Replace(name)
}

// kindOf names a Go type as the JSON a client should send.
func kindOf(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "whole number"
	case reflect.Float32, reflect.Float64:
		return "number"
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "boolean"
	}
	return t.String()
}

// decoders are reused by decodeBuy: a buy is the hottest body of all.
var decoders = sync.Pool{New: func() any { return jsontext.NewDecoder(bytes.NewReader(nil)) }}

// decodeBuy reads a buy body {"qty": n, "request_id": "…", "ticket": "…",
// "pass": "…"} (ticket and pass optional) with the same rules as decode (exact keys, no
// duplicates or nulls, whole numbers in range, application/json only,
// nothing after the object), without reflection.
func decodeBuy(c *gin.Context) (buyRequest, error) {
	var req buyRequest
	body, err := jsonBody(c)
	if err != nil {
		return req, err
	}
	dec := decoders.Get().(*jsontext.Decoder)
	defer decoders.Put(dec)
	dec.Reset(bytes.NewReader(body))
	if err := openObject(dec); err != nil {
		return req, err
	}
	for dec.PeekKind() == '"' {
		tok, err := dec.ReadToken()
		if err != nil {
			return req, decodeError(err)
		}
		name := tok.String()
		kind := dec.PeekKind()
		v, err := dec.ReadValue()
		if err != nil {
			return req, decodeError(err)
		}
		switch {
		case name != "qty" && name != "request_id" && name != "ticket" && name != "pass":
			return req, invalid("Unknown field %q (field names are case-sensitive).", name)
		case kind == 'n':
			return req, invalid("Field %q must not be null.", name)
		case name == "qty" && kind != '0':
			return req, invalid("Field %q must be a whole number.", name)
		case name == "qty":
			if req.Qty, err = strconv.ParseInt(string(v), 10, 64); err != nil {
				return req, invalid("Field %q must be a whole number in range.", name)
			}
		case kind != '"':
			return req, invalid("Field %q must be a string.", name)
		default:
			s, err := unquote(v)
			if err != nil {
				return req, decodeError(err)
			}
			switch name {
			case "ticket", "pass":
				if len(s) > tickets.MaxLen {
					return req, invalid("Field %q is too long.", name)
				}
				if name == "ticket" {
					req.Ticket = s
				} else {
					req.Pass = s
				}
			default:
				req.RequestID = s
			}
		}
	}
	if _, err := dec.ReadToken(); err != nil { // the closing brace
		return req, decodeError(err)
	}
	if _, err := dec.ReadToken(); !errors.Is(err, io.EOF) {
		return req, invalid("Request body is not valid JSON.")
	}
	return req, nil
}
