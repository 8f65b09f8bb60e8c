// Package fatal is the error of a long-running bridge (the Kafka exporter,
// the KurrentDB mirror) that retrying cannot fix: it stops the bridge and
// carries a stable code for the operator. Each bridge re-exports it as its
// own Error, with its own codes.
package fatal

import "fmt"

// Error is a failure that retrying cannot fix.
type Error struct {
	Code    string
	Message string
	Err     error
}

func (e *Error) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%s: %s: %v", e.Code, e.Message, e.Err)
	}
	return e.Code + ": " + e.Message
}

// ErrorCode returns the stable code.
func (e *Error) ErrorCode() string { return e.Code }

func (e *Error) Unwrap() error { return e.Err }
