package config

import (
	"errors"
	"fmt"
)

// ErrInvalid is matched by every configuration problem this package reports
// (errors.Is(err, ErrInvalid)), so callers can tell a bad setting, which a
// restart will not fix, from a transient failure.
var ErrInvalid = errors.New("config: invalid configuration; fix the named setting")

// FieldError describes one problem with one setting. Validate, Load, FromEnv
// and KgoOpts return them (joined with errors.Join when there are several) so
// that a caller can report every problem at once and a program can find the
// offending setting with errors.As.
type FieldError struct {
	// Field is the YAML path of the setting, e.g. "transaction_timeout" or
	// "tls.ca_file", or the environment variable name (e.g.
	// "EOS_COMMIT_INTERVAL") when the malformed value came from one.
	Field string
	// Value is the offending value as text; empty when the value is empty or
	// secret.
	Value string
	// Problem says what is wrong and how to fix it.
	Problem string
	// Err is the underlying cause, such as a file-system error, or nil.
	Err error
}

// Error formats the problem as `config: field "value": problem`.
func (e *FieldError) Error() string {
	if e.Value == "" {
		return fmt.Sprintf("config: %s: %s", e.Field, e.Problem)
	}
	return fmt.Sprintf("config: %s %q: %s", e.Field, e.Value, e.Problem)
}

// Is makes every FieldError match ErrInvalid.
func (e *FieldError) Is(target error) bool { return target == ErrInvalid }

// Unwrap returns the underlying cause, so errors.Is(err, fs.ErrNotExist)
// works for an unreadable file.
func (e *FieldError) Unwrap() error { return e.Err }
