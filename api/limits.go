package api

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/greffe/greffe/internal/quota"
	"github.com/greffe/greffe/wire"
)

// What a reader can make the node hold, and its bounds (issue #20: 40
// subscribers that never read took the node's RSS from 0.85 to 2.9 GB).
// Every resource a client holds is capped per principal and in total, and
// is released when its client stops reading:
//
//   - an SSE subscription holds a goroutine pair, a 32 KiB buffer and at
//     most two of the store's subscription pages (512 KiB each: the page
//     it delivers, the one whose events wait in its channel, at most
//     ssePendingBytes of them): capped by Config.MaxSubscriptions and
//     MaxSubscriptionsPerPrincipal;
//   - a proven read holds its page, the page's stored bytes and proofs
//     while it is built and written: capped by Config.MaxProvenReads and
//     MaxProvenReadsPerPrincipal;
//   - a page is bounded in bytes (maxPageBytes) as well as in events, a
//     page proven event by event in events (maxProvenEntries), and the
//     stored-bytes read (format=entries) copies at most entriesChunkBytes
//     out of the store at a time;
//   - every write of an answer must make progress within
//     Config.WriteTimeout (internal/progress), or the connection is
//     closed. net/http's own Server.WriteTimeout bounds a whole response
//     instead, which would end every subscription.
//
// docs/PERFORMANCE.md ("Stalled readers") measures the node's memory and
// append latency under hundreds of stalled subscribers.

// Defaults of the caps (Config).
const (
	// DefaultMaxSubscriptions: 256 stalled subscriptions hold about
	// 230 MiB of heap (measured with 8 KB events, docs/PERFORMANCE.md:
	// at most two 512 KiB pages, their event slices and a 32 KiB buffer
	// each, whatever the events' size), and leave the node's goroutines
	// and file descriptors to the rest.
	DefaultMaxSubscriptions = 256
	// DefaultMaxSubscriptionsPerPrincipal: an executor follows three
	// streams, a dashboard tab one; 32 leave room for a few of them
	// sharing a token, while one token cannot take more than an eighth of
	// the node's subscriptions from the others.
	DefaultMaxSubscriptionsPerPrincipal = 32
	// DefaultMaxProvenReads: a proven page holds up to about three times
	// maxPageBytes while it is built and written (its events, their
	// stored bytes in base64, the proofs): 16 of them stay under ~400 MiB,
	// and proofs are the CPU's work on a node of a few cores.
	DefaultMaxProvenReads = 16
	// DefaultMaxProvenReadsPerPrincipal: a verified client
	// (client/verified) reads one page at a time; 4 let a few share a
	// token.
	DefaultMaxProvenReadsPerPrincipal = 4
	// DefaultWriteTimeout is Config.WriteTimeout's default: a write of
	// progress.Chunk (64 KiB) takes a quarter of a second at 2 Mbit/s, so a
	// client that has taken nothing for 30 s is not reading.
	DefaultWriteTimeout = 30 * time.Second
)

// maxPageBytes bounds a JSON page of the log (GET /v1/all, GET
// /v1/streams/{stream}) in the stored bytes of its events (ReadOptions.
// MaxBytes): a page of 10,000 events of 64 KiB was 640 MiB built for one
// request. 8 MiB holds any one append whole (at most 4 MiB, 1,000 events),
// which client/verified reads back in one page, and 10,000 events of the
// usual few hundred bytes. A page cut by it carries "next", as a full page
// does.
const maxPageBytes = 8 << 20

// maxProvenEntries bounds the events of a proven page whose events are
// proven one by one (?prove=1, or a stream page: an inclusion proof of
// ~log2(size) hashes each), so that its proofs do not grow with the
// limit; a page proven by one range proof (?prove=range on the global
// log) carries O(log size) hashes whatever its count and keeps its limit.
const maxProvenEntries = 1000

// Retry-After of a refusal for a capped resource, in seconds: places free
// up as holders leave or are dropped (within WriteTimeout). A proven read
// holds its place for as long as its page takes to build and write
// (milliseconds on a loopback client), a subscription for as long as its
// client stays: the Go client waits what it is told before it reads again
// (client.retryCapped).
const (
	retryAfterProven        = 1
	retryAfterSubscriptions = 5
)

// quotas are the server's caps on what callers hold (Config).
type quotas struct {
	subscriptions, proven *quota.Quota
}

func newQuotas(cfg Config) quotas {
	return quotas{
		subscriptions: quota.New("sse_subscriptions", cfg.MaxSubscriptionsPerPrincipal, cfg.MaxSubscriptions),
		proven:        quota.New("proven_reads", cfg.MaxProvenReadsPerPrincipal, cfg.MaxProvenReads),
	}
}

// Quotas returns the counts of the server's caps, for the metrics
// (greffe_quota_*): SSE subscriptions and proven reads.
func (s *Server) Quotas() []quota.Stats {
	return []quota.Stats{s.quotas.subscriptions.Stats(), s.quotas.proven.Stats()}
}

// acquire takes one of q for the request's principal, or answers the
// refusal (429 code, with Retry-After) and returns false. what names the
// resource in the sentence, and the config fields that set its caps.
func acquire(w http.ResponseWriter, r *http.Request, q *quota.Quota, retryAfter int, code, what, fields string) (release func(), ok bool) {
	who := PrincipalFrom(r.Context()).Name
	release, refused := q.Acquire(who)
	if release != nil {
		return release, true
	}
	limit := q.Limit(refused)
	msg := fmt.Sprintf("%s holds %d %s at once, the most one principal may (%s); end one, or retry later", who, limit, what, fields)
	if refused == quota.ScopeTotal {
		msg = fmt.Sprintf("the node serves %d %s at once, the most it may (%s); retry later", limit, what, fields)
	}
	w.Header().Set("Retry-After", strconv.Itoa(retryAfter))
	writeError(w, &wire.Error{Code: code, Message: msg, Details: map[string]any{"scope": string(refused), "limit": limit}})
	return nil, false
}
