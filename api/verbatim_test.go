package api_test

import (
	"bufio"
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/greffe/greffe/events"
)

// TestAPI_ServesStoredBytesVerbatim (issue #21, item 3): evidence comes
// back as it was written. JSON answers used to re-marshal the stored data
// and metadata with encoding/json, which HTML-escapes them ("a<b" stored
// was served as "a\u003cb") and compacts them: what an auditor read was
// not the bytes the leaf hash covers. Every JSON answer that carries an
// event (a stream page, a page of the log, one event, a proven answer, an
// SSE frame) must now hold the stored data and metadata byte for byte.
func TestAPI_ServesStoredBytesVerbatim(t *testing.T) {
	n := startNode(t, nil)
	data := `{ "note" : "a<b & c>d", "été": "naïve — ✓", "n": 1.50,  "esc": "\u00e9\t\"" }`
	meta := `{"source":"<script>&amp;</script>", "k" : [1, 2 ]}`
	body := `{"events":[{"type":"Verbatim","data":` + data + `,"metadata":` + meta + `}]}`
	if status, code, b := post(t, n.url+"/v1/streams/verbatim", body, nil); status != http.StatusOK {
		t.Fatalf("append: %d %s %s", status, code, b)
	}
	stored, err := n.store.ReadStream(t.Context(), "verbatim", events.ReadOptions{Limit: 1})
	if err != nil || len(stored) != 1 {
		t.Fatalf("read the store: %v, %d events", err, len(stored))
	}
	e := stored[0]
	if string(e.Data) != data || string(e.Metadata) != meta {
		t.Fatalf("the store holds data %s metadata %s; want them as sent", e.Data, e.Metadata)
	}
	for _, path := range []string{
		"/v1/streams/verbatim",
		"/v1/all",
		"/v1/events/" + e.ID.String(),
		"/v1/streams/verbatim?prove=1",
		"/v1/events/" + e.ID.String() + "?prove=1",
	} {
		status, answer := get(t, n.url+path, nil)
		if status != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, status, answer)
		}
		for what, want := range map[string]string{"data": data, "metadata": meta} {
			if !strings.Contains(answer, `"`+what+`":`+want) {
				t.Errorf("GET %s: the answer does not carry the stored %s byte for byte:\nwant %s\nin   %s", path, what, want, answer)
			}
		}
	}

	// An event whose stored data holds a line break (whitespace between
	// tokens) cannot go on one SSE data line: it goes compacted, and
	// nothing is escaped.
	multi := "{\n  \"a\": \"<b>\"\n}"
	if status, code, b := post(t, n.url+"/v1/streams/verbatim", `{"events":[{"type":"Verbatim","data":`+multi+`}]}`, nil); status != http.StatusOK {
		t.Fatalf("append: %d %s %s", status, code, b)
	}
	if status, answer := get(t, n.url+"/v1/streams/verbatim?from=1", nil); status != http.StatusOK || !strings.Contains(answer, `"data":`+multi) {
		t.Errorf("GET the second event: %d: the answer does not carry the stored data byte for byte: %s", status, answer)
	}

	// The SSE frames of the same events.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, n.url+"/v1/subscribe?from=0", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	var frames [][]byte
	for len(frames) < 2 && sc.Scan() {
		if line := sc.Bytes(); bytes.HasPrefix(line, []byte("data: ")) {
			frames = append(frames, bytes.Clone(line))
		}
	}
	if len(frames) != 2 {
		t.Fatalf("%d SSE frames, want 2: %v", len(frames), sc.Err())
	}
	if !bytes.Contains(frames[0], []byte(`"data":`+data)) || !bytes.Contains(frames[0], []byte(`"metadata":`+meta)) {
		t.Errorf("the SSE frame does not carry the stored data and metadata byte for byte: %s", frames[0])
	}
	if !bytes.Contains(frames[1], []byte(`"data":{"a":"<b>"}`)) {
		t.Errorf("the SSE frame of data with a line break: %s; want it compacted, unescaped", frames[1])
	}
}
