package projections

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/greffe/greffe/aggregates"
	"github.com/greffe/greffe/events"
)

// BenchmarkEventData is the measured reason for fields.go: a read model
// takes a few members of a stored event's data with the scanner, where the
// one decoder of stored data (events.DecodeStored, json/v2's engine)
// decodes the whole event into its aggregate type.
//
//	go test ./projections -run '^$' -bench EventData -count 3
func BenchmarkEventData(b *testing.B) {
	data, err := json.Marshal(aggregates.CheckRecorded{MissionID: "m-bench", CandidateHash: "c0ffee",
		CheckID: "unit-tests", ArgvHash: "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
		Outcome: "pass", Runner: "ci", RunnerKind: "independent", At: time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)})
	if err != nil {
		b.Fatal(err)
	}
	b.Run("scanner", func(b *testing.B) {
		keys := []string{"mission_id", "candidate_hash", "check_id", "outcome", "runner_kind"}
		vals := make([][]byte, len(keys))
		b.SetBytes(int64(len(data)))
		b.ReportAllocs()
		for b.Loop() {
			fields(data, keys, vals)
		}
	})
	b.Run("DecodeStored", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		b.ReportAllocs()
		for b.Loop() {
			var d aggregates.CheckRecorded
			if err := events.DecodeStored(data, &d); err != nil {
				b.Fatal(err)
			}
		}
	})
}
