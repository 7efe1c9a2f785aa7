package grpcworker

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		err       error
		class     Class
		http      int
		retry     bool
		fault     bool
		className string
	}{
		{nil, OK, 200, false, false, "ok"},
		{status.Error(codes.Unavailable, "x"), Unavailable, 503, true, true, "unavailable"},
		{ErrClosed, Unavailable, 503, true, true, "unavailable"},
		{fmt.Errorf("%w grpc://a:1: refused", ErrConnect), Unavailable, 503, true, true, "unavailable"},
		{fmt.Errorf("%w: down", ErrUnhealthy), Unavailable, 503, true, true, "unavailable"},
		{status.Error(codes.ResourceExhausted, "x"), Backpressure, 429, true, false, "backpressure"},
		{fmt.Errorf("%w: 2 open", ErrStreamLimit), Backpressure, 429, true, false, "backpressure"},
		{status.Error(codes.InvalidArgument, "x"), ClientError, 400, false, false, "client_error"},
		{status.Error(codes.OutOfRange, "x"), ClientError, 400, false, false, "client_error"},
		{status.Error(codes.FailedPrecondition, "x"), ClientError, 400, false, false, "client_error"},
		{status.Error(codes.NotFound, "x"), ClientError, 400, false, false, "client_error"},
		{status.Error(codes.AlreadyExists, "x"), ClientError, 400, false, false, "client_error"},
		{ErrBadRequest, ClientError, 400, false, false, "client_error"},
		{status.Error(codes.Canceled, "x"), Canceled, 499, false, false, "canceled"},
		{context.Canceled, Canceled, 499, false, false, "canceled"},
		{fmt.Errorf("wrapped: %w", context.Canceled), Canceled, 499, false, false, "canceled"},
		{status.Error(codes.DeadlineExceeded, "x"), Timeout, 504, false, true, "timeout"},
		{context.DeadlineExceeded, Timeout, 504, false, true, "timeout"},
		{status.Error(codes.Unimplemented, "x"), Unsupported, 501, false, false, "unsupported"},
		{ErrUnsupported, Unsupported, 501, false, false, "unsupported"},
		{status.Error(codes.Internal, "x"), Internal, 502, false, true, "internal"},
		{status.Error(codes.Unknown, "x"), Internal, 502, false, true, "internal"},
		{status.Error(codes.DataLoss, "x"), Internal, 502, false, true, "internal"},
		{status.Error(codes.Aborted, "x"), Internal, 502, false, true, "internal"},
		{status.Error(codes.PermissionDenied, "x"), Internal, 502, false, true, "internal"},
		{status.Error(codes.Unauthenticated, "x"), Internal, 502, false, true, "internal"},
		{ErrTruncated, Internal, 502, false, true, "internal"},
		{ErrBadResponse, Internal, 502, false, true, "internal"},
		{errors.New("something else"), Internal, 502, false, true, "internal"},
	} {
		c := Classify(tc.err)
		if c != tc.class || c.HTTPStatus() != tc.http || c.Retryable() != tc.retry || c.Fault() != tc.fault || c.String() != tc.className {
			t.Errorf("Classify(%v) = %v (http %d, retry %v, fault %v); want %v (http %d, retry %v, fault %v, %q)",
				tc.err, c, c.HTTPStatus(), c.Retryable(), c.Fault(), tc.class, tc.http, tc.retry, tc.fault, tc.className)
		}
	}
	if Class(200).String() != "unknown" {
		t.Error("an out-of-range class has a name")
	}
}

func TestMessage(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{nil, ""},
		{status.Error(codes.InvalidArgument, "max_new_tokens must be positive"), "max_new_tokens must be positive"},
		{ErrStreamLimit, ErrStreamLimit.Error()},
		{context.Canceled, "context canceled"},
	} {
		if got := Message(tc.err); got != tc.want {
			t.Errorf("Message(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}
