package verified

import (
	"errors"
	"fmt"

	"github.com/greffe/greffe/audit"
	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/wire"
)

// Completeness (#20, finding 11). Inclusion proofs show that what a page
// holds is in the ledger; they say nothing of what it leaves out. What the
// checkpoint proves exists, a page must hold:
//
//   - a page of the global log read forward from p with limit L, against a
//     checkpoint of size N, holds every position of [p, min(p+L, N)), or
//     stops earlier with a "next" where it stops (a node that sizes its
//     pages in bytes), with at least one event: an empty page at p < N is
//     refused whatever it says. A "next" is always where the page ends.
//   - a backward page from f starts at min(f, N-1), and holds
//     min(L, start+1) events or says where it stops.
//   - a stream page's versions follow each other from where it was asked;
//     where it claims the stream's end (a forward page without "next", a
//     backward page that starts below the version asked for, an empty
//     page) the claim is proven: the stream index is not in the Merkle
//     tree, so nothing the node serves proves which version is a stream's
//     newest, and the client reads, proven, every event after the page's
//     newest up to the checkpoint's size and checks that none is of the
//     stream (Config.MaxStreamEndScan bounds it: beyond, the read is
//     refused with an *UnprovenEndError rather than presented unproven).
//
// A node can race itself: it reads the page, then signs the checkpoint,
// and an append in between makes an honest page look short. A page that
// falls short is therefore read once more, and the second answer must hold
// what the first answer's checkpoint proves (the node's head has reached
// it by then); only then is it an omission. Answers the node gives later
// than its checkpoint cannot be told from events appended after it: what a
// verified read shows is complete up to its checkpoint, never "up to now".

// KindEventOmitted: an answer leaves out events that its checkpoint proves
// exist (an *OmissionError, as the Kind of its *audit.ProofError). Stable.
const KindEventOmitted = "event_omitted"

// KindStreamEndUnproven: a stream page claims the stream's end and the
// client could not prove it within Config.MaxStreamEndScan (an
// *UnprovenEndError). Stable.
const KindStreamEndUnproven = "stream_end_unproven"

// OmissionError says what an answer left out. It is a proof failure
// (IsProofFailure; errors.As finds an *audit.ProofError of Kind
// KindEventOmitted in it).
type OmissionError struct {
	// Stream is the stream whose events were left out, "" for the global
	// log.
	Stream string
	// From and To bound what is missing, [From, To): positions of the
	// global log, or versions of Stream.
	From, To uint64
	// Position is, for a stream, the position of an event of it the
	// answer left out, as the client found it in the global log (proven);
	// -1 when the versions are known missing but not where they are, and
	// for the global log.
	Position int64
	// Checkpoint is the size of the signed checkpoint that proves them.
	Checkpoint uint64
}

func (e *OmissionError) Error() string { return e.proofError().Error() }

// Unwrap makes an *OmissionError a proof failure of Kind KindEventOmitted.
func (e *OmissionError) Unwrap() error { return e.proofError() }

func (e *OmissionError) proofError() *audit.ProofError {
	var d string
	switch {
	case e.Stream == "":
		d = fmt.Sprintf("the answer leaves out %s, which the checkpoint of size %d proves exist", span("the event at position", "the events at positions", e.From, e.To), e.Checkpoint)
	case e.Position >= 0:
		d = fmt.Sprintf("the answer leaves out %s of stream %s, which the checkpoint of size %d holds (at position %d)", span("version", "versions", e.From, e.To), e.Stream, e.Checkpoint, e.Position)
	default:
		d = fmt.Sprintf("the answer leaves out %s of stream %s, which the checkpoint of size %d holds", span("version", "versions", e.From, e.To), e.Stream, e.Checkpoint)
	}
	return &audit.ProofError{Kind: KindEventOmitted, Detail: d}
}

// span names [from, to): "one 7" or "many 7 to 9".
func span(one, many string, from, to uint64) string {
	if to == from+1 {
		return fmt.Sprintf("%s %d", one, from)
	}
	return fmt.Sprintf("%s %d to %d", many, from, to-1)
}

// ErrEndUnproven is what an *UnprovenEndError matches.
var ErrEndUnproven = errors.New(KindStreamEndUnproven)

// UnprovenEndError: a stream page claims the stream's end (its newest
// version, or that it has none) and proving it would read more events of
// the global log than Config.MaxStreamEndScan. Not a proof failure: the
// node may be honest; the client refuses to present as the end what it
// has not proven. Page holds what the answer showed, each event proven,
// for a caller that accepts an unproven end.
type UnprovenEndError struct {
	Stream string
	// After is the position after which the client would have to read
	// (the page's newest event; -1 when the page is empty), Checkpoint
	// the checkpoint's size: Checkpoint - After - 1 events.
	After      int64
	Checkpoint uint64
	// Bound is the Config.MaxStreamEndScan in force.
	Bound int
	Page  wire.ReadOut
}

func (e *UnprovenEndError) Error() string {
	return fmt.Sprintf("%s: the node says the newest event of stream %s is at position %d (-1: none); proving that no later event of the checkpoint of size %d is of the stream means reading %d events, more than %d (verified.Config.MaxStreamEndScan). "+
		"The events shown are proven; that none follows is not: read the stream by version (a full page claims no end), or raise the bound",
		KindStreamEndUnproven, e.Stream, e.After, e.Checkpoint, int64(e.Checkpoint)-e.After-1, e.Bound)
}

// Unwrap makes an *UnprovenEndError match ErrEndUnproven.
func (e *UnprovenEndError) Unwrap() error { return ErrEndUnproven }

// DefaultMaxStreamEndScan is the default Config.MaxStreamEndScan: one page
// of the global log at events.MaxReadLimit, proven by one range proof
// (a few MB of event bytes at most), so that the stream a client is
// working on (whose newest event is recent) is proven for the price of
// one more request, and an old stream's end is refused rather than read
// at the cost of the log's whole tail.
const DefaultMaxStreamEndScan = events.MaxReadLimit

// globalComplete checks that a proven page of the global log, read with o,
// holds what the checkpoint of size ref proves exists (see the top of this
// file); its positions already follow each other (step). It returns nil
// or an *OmissionError.
func globalComplete(page wire.ReadOut, o events.ReadOptions, ref uint64) error {
	evs, k, lim := page.Events, uint64(len(page.Events)), uint64(o.EffectiveLimit())
	if o.Direction != events.Backward {
		p := o.From
		end := p + k
		if page.Next != nil && *page.Next != end {
			return nextError(page.Next, end, ref, "")
		}
		// A forward page at or beyond ref claims nothing the checkpoint
		// proves: what follows it is newer than the checkpoint.
		want := p
		if p < ref {
			want = p + min(lim, ref-p)
		}
		if end >= want || (k > 0 && page.Next != nil) {
			return nil
		}
		return &OmissionError{From: end, To: want, Position: -1, Checkpoint: ref}
	}
	if ref == 0 {
		return nil // nothing is proven to exist
	}
	top := min(o.From, ref-1)
	if k == 0 {
		return &OmissionError{From: top + 1 - min(lim, top+1), To: top + 1, Position: -1, Checkpoint: ref}
	}
	first, last := evs[0].Position, evs[k-1].Position
	if first > o.From {
		return &audit.ProofError{Kind: audit.KindProofInvalid, Detail: fmt.Sprintf("a backward page from position %d starts at position %d", o.From, first)}
	}
	if first < top {
		return &OmissionError{From: first + 1, To: top + 1, Position: -1, Checkpoint: ref}
	}
	return backwardTail(page, k, first, last, lim, ref, "")
}

// backwardTail checks the low end of a backward page whose first element
// (a position, or a version of stream) is first and last its last: it
// holds min(lim, first+1) or says where it stops, at last-1.
func backwardTail(page wire.ReadOut, k, first, last, lim, ref uint64, stream string) error {
	if n := page.Next; n != nil && (last == 0 || *n != last-1) {
		if last > 0 && *n < last-1 {
			return &OmissionError{Stream: stream, From: *n + 1, To: last, Position: -1, Checkpoint: ref}
		}
		return &audit.ProofError{Kind: audit.KindProofInvalid, Detail: fmt.Sprintf("a backward page that ends at %d says the next is %d", last, *n)}
	}
	want := min(lim, first+1)
	if k >= want || page.Next != nil {
		return nil
	}
	return &OmissionError{Stream: stream, From: first + 1 - want, To: last, Position: -1, Checkpoint: ref}
}

// nextError is a "next" that is not where the page ends (at): one beyond
// it skips what lies between (an omission), one before goes back.
func nextError(next *uint64, at, ref uint64, stream string) error {
	if *next > at {
		return &OmissionError{Stream: stream, From: at, To: *next, Position: -1, Checkpoint: ref}
	}
	what := "position"
	if stream != "" {
		what = "version"
	}
	return &audit.ProofError{Kind: audit.KindProofInvalid, Detail: fmt.Sprintf("the page says the next %s is %d where it ends at %d", what, *next, at)}
}
