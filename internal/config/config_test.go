package config

import (
	"errors"
	"testing"
)

func TestProblems(t *testing.T) {
	errInvalid := errors.New("pkg: invalid config")
	var p Problems
	if err := p.Err(errInvalid); err != nil {
		t.Fatalf("no problem: %v, want nil", err)
	}
	p.Addf("addr %q: no port", "127.0.0.1")
	p.Addf("cap is %d; must not be negative", -1)
	err := p.Err(errInvalid)
	if want := `pkg: invalid config: addr "127.0.0.1": no port; cap is -1; must not be negative`; err.Error() != want {
		t.Fatalf("Error() = %q, want %q", err, want)
	}
	var ve *ValidationError
	if !errors.Is(err, errInvalid) || !errors.As(err, &ve) || len(ve.Problems) != 2 {
		t.Fatalf("err = %#v: want a *ValidationError of 2 problems wrapping the sentinel", err)
	}
}
