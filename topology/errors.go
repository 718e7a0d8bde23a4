package topology

import (
	"errors"
	"fmt"
)

// ErrInvalid matches every error Validate returns, so callers can tell a
// mistake in the pipeline's declaration from a runtime failure.
var ErrInvalid = errors.New("topology: invalid")

// ValidationError names the node (or topology) at fault and what to change.
type ValidationError struct {
	Node    string // "" when the problem concerns the whole topology
	Problem string
}

// Error names the node and the problem.
func (e *ValidationError) Error() string {
	if e.Node == "" {
		return "topology: " + e.Problem
	}
	return fmt.Sprintf("topology: node %q: %s", e.Node, e.Problem)
}

// Is makes errors.Is(err, ErrInvalid) hold for every ValidationError.
func (e *ValidationError) Is(target error) bool { return target == ErrInvalid }

// NodeError is a failure of user code at one node while processing a record.
// The processor applies the node's error policy to it.
type NodeError struct {
	Node  string
	Err   error
	Stack []byte // set when the error was a panic
}

// Error names the node and whether it panicked.
func (e *NodeError) Error() string {
	if e.Stack != nil {
		return fmt.Sprintf("node %q panicked: %v", e.Node, e.Err)
	}
	return fmt.Sprintf("node %q: %v", e.Node, e.Err)
}

// Unwrap exposes the user's error to errors.Is and errors.As.
func (e *NodeError) Unwrap() error { return e.Err }
