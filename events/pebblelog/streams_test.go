package pebblelog_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/greffe/greffe/events"
)

func si(name string, version, position uint64) events.StreamInfo {
	return events.StreamInfo{Name: name, Version: version, Position: position}
}

// TestStore_ListStreams: streams in name order with their last version
// and position, runs of several events included, filtered by prefix,
// paged by after and limit; "a" and "ab" stay apart.
func TestStore_ListStreams(t *testing.T) {
	s, _ := openStore(t, t.TempDir())
	ctx := t.Context()
	appends := []struct {
		stream string
		n      int
	}{{"ab", 1}, {"a", 3}, {"b", 1}, {"a", 2}, {"abc", 1}}
	for _, a := range appends {
		ps := make([]events.Proposed, a.n)
		for i := range ps {
			ps[i] = ev("T", `{}`)
		}
		if _, err := s.Append(ctx, one(a.stream, events.ExpectAny, ps...)); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name          string
		prefix, after string
		limit         int
		want          []events.StreamInfo
	}{
		{"all", "", "", 0, []events.StreamInfo{si("a", 4, 6), si("ab", 0, 0), si("abc", 0, 7), si("b", 0, 4)}},
		{"prefix a", "a", "", 0, []events.StreamInfo{si("a", 4, 6), si("ab", 0, 0), si("abc", 0, 7)}},
		{"prefix ab", "ab", "", 0, []events.StreamInfo{si("ab", 0, 0), si("abc", 0, 7)}},
		{"limit", "", "", 2, []events.StreamInfo{si("a", 4, 6), si("ab", 0, 0)}},
		{"after", "", "ab", 0, []events.StreamInfo{si("abc", 0, 7), si("b", 0, 4)}},
		{"after a name between", "", "aa", 1, []events.StreamInfo{si("ab", 0, 0)}},
		{"after before the prefix", "b", "a", 0, []events.StreamInfo{si("b", 0, 4)}},
		{"none", "z", "", 0, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.ListStreams(ctx, tc.prefix, tc.after, tc.limit)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
