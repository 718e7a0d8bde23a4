package eos

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// A query's statuses keep their words; any other error answers 500 with
// generic text, as its detail may name paths or brokers.
func TestKeyErrorHidesDetail(t *testing.T) {
	secret := errors.New("pebble: open /var/lib/eos/app/counts/000042.sst: i/o error")
	for _, tc := range []struct {
		err    error
		code   int
		status string
	}{
		{fmt.Errorf("%w %q", ErrUnknownStore, "x"), http.StatusNotFound, "unknown_store"},
		{&QueryError{Store: "s", Topic: "in", Partition: 1, Err: ErrRestoring}, http.StatusServiceUnavailable, "restoring"},
		{&QueryError{Store: "s", Topic: "in", Partition: 1, Err: ErrStopped}, http.StatusServiceUnavailable, "stopped"},
		{&QueryError{Store: "s", Topic: "in", Partition: 1, Err: ErrNotOwner}, http.StatusMisdirectedRequest, "not_owner"},
		{fmt.Errorf("reading: %w", secret), http.StatusInternalServerError, "error"},
		{&unavailableError{fmt.Errorf("listing topics: %w", secret)}, http.StatusServiceUnavailable, "unavailable"},
	} {
		code, status, text := keyError(tc.err)
		if code != tc.code || status != tc.status {
			t.Errorf("%v: %d %s, want %d %s", tc.err, code, status, tc.code, tc.status)
		}
		if code == http.StatusInternalServerError && (strings.Contains(text, "pebble") || strings.Contains(text, "/var/lib")) {
			t.Errorf("500 text %q shows the error's detail", text)
		}
		if code == http.StatusServiceUnavailable && status == "unavailable" && strings.Contains(text, "pebble") {
			t.Errorf("503 text %q shows the error's detail", text)
		}
		if code != http.StatusInternalServerError && status != "unavailable" && text != tc.err.Error() {
			t.Errorf("%v: text %q, want the error's", tc.err, text)
		}
	}
}
