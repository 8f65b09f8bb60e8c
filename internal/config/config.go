// Package config holds the one error a configuration's Validate returns
// (STYLE.md, "One of each": Config + setDefaults() + Validate() error
// returning a *ValidationError that wraps the package's ErrInvalidConfig).
// It imports the standard library only, so that any package may use it.
package config

import (
	"fmt"
	"strings"
)

// ValidationError lists every problem of a configuration at once, so that
// an operator fixes them in one pass rather than one per start.
type ValidationError struct {
	// Err is the package's ErrInvalidConfig: errors.Is(err,
	// pkg.ErrInvalidConfig) holds for the whole error.
	Err error
	// Problems each name a field and what is wrong with its value.
	Problems []string
}

// Error is Err's text, then the problems joined by "; ".
func (e *ValidationError) Error() string {
	return e.Err.Error() + ": " + strings.Join(e.Problems, "; ")
}

// Unwrap returns Err, the package's ErrInvalidConfig.
func (e *ValidationError) Unwrap() error { return e.Err }

// Problems collects a Validate's problems; its zero value is empty.
type Problems []string

// Addf adds one problem, formatted as fmt.Sprintf does.
func (p *Problems) Addf(format string, args ...any) {
	*p = append(*p, fmt.Sprintf(format, args...))
}

// Err returns nil when there is no problem, else a *ValidationError of
// every problem wrapping sentinel (the package's ErrInvalidConfig).
func (p Problems) Err(sentinel error) error {
	if len(p) == 0 {
		return nil
	}
	return &ValidationError{Err: sentinel, Problems: p}
}
