package koinon

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
)

// Error is any error koinon answered with, built from its error shape
// {"error": {"code", "message", "fields"}} (docs/api.md). Match the kind with errors.Is
// (errors.Is(err, koinon.ErrNotFound)) and read the details with errors.As.
type Error struct {
	Status  int               // the HTTP status; 0 for a stream that ended early
	Code    string            // part of the API contract: not_found, empty_query, …
	Message string            // for people
	Fields  map[string]string // each bad input of a 422, by field name
	kind    error
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// Is makes errors.Is(err, ErrNotFound) and the other kinds work.
func (e *Error) Is(target error) bool { return e.kind == target }

// The kinds of Error.
var (
	ErrBadRequest         = kind("bad request (400)")
	ErrAuthentication     = kind("no key, a malformed header, or an unknown or revoked key (401)")
	ErrPermissionDenied   = kind("permission denied (403)")
	ErrNotFound           = kind("missing, or not visible to you; koinon answers both alike (404)")
	ErrConflict           = kind("conflict (409)")
	ErrPayloadTooLarge    = kind("payload too large (413)")
	ErrValidation         = kind("input that fails validation; Fields names each bad one (422)")
	ErrServiceUnavailable = kind("service unavailable (503)")
	ErrServer             = kind("server error (5xx)")
	ErrStream             = kind("the event stream ended without its final event")
	ErrRunFailed          = kind("the run ended failed (provider_error, internal_error, queue_unavailable)")
	ErrOther              = kind("another error status")
)

type kindError string

func (k kindError) Error() string { return "koinon: " + string(k) }

func kind(text string) error { return kindError(text) }

var byStatus = map[int]error{
	400: ErrBadRequest,
	401: ErrAuthentication,
	403: ErrPermissionDenied,
	404: ErrNotFound,
	409: ErrConflict,
	413: ErrPayloadTooLarge,
	422: ErrValidation,
	503: ErrServiceUnavailable,
}

// errorFromResponse reads an error response into its typed Error.
func errorFromResponse(response *http.Response) *Error {
	body, _ := io.ReadAll(io.LimitReader(response.Body, 1<<20))
	e := &Error{Status: response.StatusCode, Code: fmt.Sprintf("http_%d", response.StatusCode),
		Message: http.StatusText(response.StatusCode), Fields: map[string]string{}}
	var shape struct {
		Error struct {
			Code    string         `json:"code"`
			Message string         `json:"message"`
			Fields  map[string]any `json:"fields"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &shape) == nil && shape.Error.Code != "" {
		e.Code = shape.Error.Code
		if shape.Error.Message != "" {
			e.Message = shape.Error.Message
		}
		for name, value := range shape.Error.Fields {
			e.Fields[name] = fmt.Sprint(value)
		}
	}
	e.kind = byStatus[response.StatusCode]
	if e.kind == nil {
		e.kind = ErrOther
		if response.StatusCode >= 500 {
			e.kind = ErrServer
		}
	}
	return e
}

func streamError(kind error, code, message string) *Error {
	return &Error{Code: code, Message: message, Fields: map[string]string{}, kind: kind}
}
