package main

import "testing"

func TestBar(t *testing.T) {
	tests := []struct {
		done, total uint64
		want        string
	}{
		{0, 100, "[                    ]"},
		{50, 100, "[==========          ]"},
		{100, 100, "[====================]"},
		{150, 100, "[====================]"},
		{0, 0, "[====================]"},
	}
	for _, tc := range tests {
		if got := bar(tc.done, tc.total); got != tc.want {
			t.Errorf("bar(%d, %d) = %q, want %q", tc.done, tc.total, got, tc.want)
		}
	}
}
