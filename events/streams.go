package events

// StreamInfo is one stream as the log's index knows it: its name, the
// version and position of its last acknowledged event. Its event count is
// Version + 1 (versions start at 0 and have no gaps).
type StreamInfo struct {
	// Name is the stream's name.
	Name string `json:"name"`
	// Version is the stream's newest version: its number of events minus one.
	Version uint64 `json:"version"`
	// Position is the global position of the stream's newest event.
	Position uint64 `json:"position"`
}

// MaxListStreams bounds one page of a stream listing; DefaultListStreams is
// a page's size when none is asked.
const (
	DefaultListStreams = 100
	MaxListStreams     = 10000
)
