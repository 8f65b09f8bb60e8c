package export

import "fmt"

// Error is a failure of an exporter that retrying cannot fix: Run stops
// with it, and it carries a stable code for the operator. Each exporter
// names it as its own Error, with its own codes (kafka.CodeTopicNotFound,
// kurrent.CodeDiverged, …).
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
