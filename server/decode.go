package server

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
)

// decode reads the request body as one JSON value into dst, refusing
// unknown fields, wrong types, trailing data and bodies over the limit.
func decode(c *gin.Context, dst any) error {
	dec := json.NewDecoder(c.Request.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return decodeError(err)
	}
	if err := dec.Decode(&struct{}{}); !errors.Is(err, io.EOF) {
		if err != nil {
			if e := decodeError(err); e.Code == "body_too_large" {
				return e
			}
		}
		return invalid("Request body must hold exactly one JSON object.")
	}
	return nil
}

func decodeError(err error) *Error {
	var tooLarge *http.MaxBytesError
	var typeErr *json.UnmarshalTypeError
	var syntaxErr *json.SyntaxError
	var timeErr *time.ParseError
	switch {
	case errors.As(err, &tooLarge):
		return bodyTooLarge(tooLarge.Limit)
	case errors.Is(err, io.EOF):
		return invalid("Request body is empty; a JSON object is expected.")
	case errors.As(err, &typeErr):
		if typeErr.Field == "" {
			return invalid("Request body must be a JSON object.")
		}
		return invalid("Field %q must be a %s.", typeErr.Field, jsonKind(typeErr.Type.Kind().String()))
	case errors.As(err, &timeErr):
		return invalid("Times must be RFC 3339, like 2026-11-29T20:00:00Z.")
	case errors.As(err, &syntaxErr), errors.Is(err, io.ErrUnexpectedEOF):
		return invalid("Request body is not valid JSON.")
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return invalid("Unknown field %s.", strings.TrimPrefix(err.Error(), "json: unknown field "))
	}
	return invalid("Request body is not valid JSON.")
}

func jsonKind(goKind string) string {
	switch {
	case strings.HasPrefix(goKind, "int"), strings.HasPrefix(goKind, "uint"):
		return "whole number"
	case strings.HasPrefix(goKind, "float"):
		return "number"
	case goKind == "string":
		return "string"
	case goKind == "bool":
		return "boolean"
	}
	return goKind
}
