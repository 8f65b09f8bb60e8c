package api

import (
	"encoding/base64"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/internal/jsonscan"
)

// The answer to an append, written by hand.
//
// encoding/json spent 8.8 % of a node's CPU writing the answers to appends
// of 100 events (issue #14, 16 writers × 100, profiled): each answer is
// a hundred {id, stream, version, position, leaf_hash, recorded_at}
// objects, by reflection. Measured by BenchmarkAppendOut (the answer to a
// 100-event append, go test ./api -run '^$' -bench AppendOut -count 3, 2
// shared cores, issue #21): 19-21 µs and 1 allocation against 143-183 µs,
// 42 KB and 303 allocations through writeJSON. writeAppendOut writes exactly the bytes
// writeJSON(w, 200, appendOut(o)) writes (TestAppendOut_SameBytes and
// FuzzAppendOut check it): stream names quoted as encoding/json quotes
// them (jsonscan.AppendMarshalString), and hands an answer to writeJSON
// whenever a time is outside what encoding/json writes.

// appendOutBuffers recycles the answers' buffers: 100 events make ~16 KB.
var appendOutBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 16<<10); return &b }}

func writeAppendOut(w http.ResponseWriter, o events.Outcome) {
	bp := appendOutBuffers.Get().(*[]byte)
	b, ok := appendOutJSON((*bp)[:0], o)
	if !ok {
		appendOutBuffers.Put(bp)
		writeJSON(w, http.StatusOK, appendOut(o))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
	if cap(b) <= 1<<20 {
		*bp = b
		appendOutBuffers.Put(bp)
	}
}

// appendOutJSON appends the JSON of appendOut(o) and a newline, as
// json.Encoder writes it; false when a time is outside what encoding/json
// writes (years 0 to 9999).
func appendOutJSON(b []byte, o events.Outcome) ([]byte, bool) {
	b = append(b, `{"events":[`...)
	for i := range o.Events {
		e := &o.Events[i]
		if e.RecordedAt.Year() < 0 || e.RecordedAt.Year() > 9999 {
			return b, false
		}
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"id":"`...)
		b = jsonscan.AppendUUID(b, e.ID)
		b = append(b, `","stream":`...)
		b = jsonscan.AppendMarshalString(b, e.Stream)
		b = append(b, `,"version":`...)
		b = strconv.AppendUint(b, e.Version, 10)
		b = append(b, `,"position":`...)
		b = strconv.AppendUint(b, e.Position, 10)
		b = append(b, `,"leaf_hash":"`...)
		b = base64.StdEncoding.AppendEncode(b, e.LeafHash[:])
		b = append(b, `","recorded_at":"`...)
		b = e.RecordedAt.AppendFormat(b, time.RFC3339Nano)
		b = append(b, `"}`...)
	}
	if o.Duplicate {
		b = append(b, `],"duplicate":true}`...)
	} else {
		b = append(b, `],"duplicate":false}`...)
	}
	return append(b, '\n'), true
}
