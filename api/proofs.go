package api

import (
	"encoding/binary"
	"fmt"
	"net/http"
	"strconv"

	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/tessera/api/layout"

	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/wire"
)

func (s *Server) proofRoutes() {
	s.Handle("GET /v1/proof/inclusion", s.inclusionProof, readerRoles()...)
	s.Handle("GET /v1/proof/consistency", s.consistencyProof, readerRoles()...)
	// C2SP tlog-tiles, read-only.
	s.Handle("GET /tlog/checkpoint", s.checkpoint, readerRoles()...)
	s.Handle("GET /tlog/tile/entries/{n...}", s.entryBundle, readerRoles()...)
	s.Handle("GET /tlog/tile/{level}/{n...}", s.hashTile, readerRoles()...)
}

func queryUint(r *http.Request, name string, def uint64, required bool) (uint64, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		if required {
			return 0, &wire.Error{Code: wire.CodeInvalidQuery, Field: name, Message: name + " is required"}
		}
		return def, nil
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, &wire.Error{Code: wire.CodeInvalidQuery, Field: name, Message: fmt.Sprintf("%s %q must be a non-negative integer", name, v)}
	}
	return n, nil
}

// inclusionProof serves GET /v1/proof/inclusion?position=P&size=N: the RFC
// 6962 inclusion proof of the leaf at P in the tree of the first N events
// (default: the acknowledged head), hashes in RFC order. The root is the
// one a signed checkpoint of size N carries; clients check the proof
// against that checkpoint, never against this answer alone.
func (s *Server) inclusionProof(w http.ResponseWriter, r *http.Request) {
	head := s.ledger.Head()
	pos, err := queryUint(r, "position", 0, true)
	if err != nil {
		writeError(w, err)
		return
	}
	size, err := queryUint(r, "size", head.Size, false)
	if err != nil {
		writeError(w, err)
		return
	}
	switch {
	case size == 0:
		writeError(w, &wire.Error{Code: events.CodeNotFound, Field: "size",
			Message: "the empty tree (size 0) has no leaves: no inclusion proof exists in it"})
		return
	case size > head.Size || pos >= size:
		writeError(w, &wire.Error{Code: events.CodeNotFound,
			Message: fmt.Sprintf("need position < size <= head; got position %d, size %d, head %d", pos, size, head.Size)})
		return
	}
	ctx := r.Context()
	hashes, err := events.InclusionProof(ctx, s.ledger, pos, size)
	if err != nil {
		writeError(w, err)
		return
	}
	leaf, err := s.ledger.ReadHashes(ctx, leafID(pos))
	if err != nil {
		writeError(w, err)
		return
	}
	root, err := s.rootAt(r, head, size)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, wire.InclusionOut{Position: pos, Size: size, LeafHash: leaf[0], Root: root[:], Hashes: hashes})
}

// consistencyProof serves GET /v1/proof/consistency?from=A&to=B (to
// defaults to the head): the RFC 6962 consistency proof between the trees
// of the first A and B events. From the empty tree (A = 0) it is the empty
// proof and root_from is SHA-256 of the empty string; A = B is the empty
// proof too.
func (s *Server) consistencyProof(w http.ResponseWriter, r *http.Request) {
	head := s.ledger.Head()
	from, err := queryUint(r, "from", 0, true)
	if err != nil {
		writeError(w, err)
		return
	}
	to, err := queryUint(r, "to", head.Size, false)
	if err != nil {
		writeError(w, err)
		return
	}
	if from > to || to > head.Size {
		writeError(w, &wire.Error{Code: events.CodeNotFound,
			Message: fmt.Sprintf("need from <= to <= head; got from %d, to %d, head %d", from, to, head.Size)})
		return
	}
	ctx := r.Context()
	hashes := [][]byte{}
	if from > 0 && from < to {
		if hashes, err = events.ConsistencyProof(ctx, s.ledger, from, to); err != nil {
			writeError(w, err)
			return
		}
	}
	r1, err := s.rootAt(r, head, from)
	if err != nil {
		writeError(w, err)
		return
	}
	r2, err := s.rootAt(r, head, to)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, wire.ConsistencyOut{From: from, To: to, RootFrom: r1[:], RootTo: r2[:], Hashes: hashes})
}

// rootAt returns the root of the first size events: SHA-256 of the empty
// string for 0, the head's root (already computed) for the head, else
// folded from the stored nodes.
func (s *Server) rootAt(r *http.Request, head events.Head, size uint64) ([32]byte, error) {
	switch size {
	case 0:
		return events.EmptyRoot, nil
	case head.Size:
		return head.Root, nil
	}
	return events.RootAt(r.Context(), s.ledger, size)
}

// tileParams parses "<N>[.p/<W>]" and returns the tile index and the number
// of hashes (or entries) to serve, which must exist in a log of size
// count (count is the number of nodes at the tile's base level).
func tileParams(n string, count uint64) (index, width uint64, full bool, err error) {
	idx, p, perr := layout.ParseTileIndexPartial(n)
	if perr != nil {
		return 0, 0, false, &wire.Error{Code: events.CodeNotFound, Message: fmt.Sprintf("tile index %q: %v", n, perr)}
	}
	width = layout.TileWidth
	if p > 0 {
		width = uint64(p)
	}
	if idx*layout.TileWidth+width > count {
		return 0, 0, false, &wire.Error{Code: events.CodeNotFound, Message: fmt.Sprintf("tile %s is beyond the log", n)}
	}
	return idx, width, p == 0, nil
}

func tileCache(w http.ResponseWriter, full bool) {
	if full {
		// A full tile never changes.
		w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
	} else {
		w.Header().Set("Cache-Control", "public, max-age=60")
	}
	w.Header().Set("Content-Type", "application/octet-stream")
}

func (s *Server) hashTile(w http.ResponseWriter, r *http.Request) {
	level, err := layout.ParseTileLevel(r.PathValue("level"))
	if err != nil || level*8 >= 64 {
		writeError(w, &wire.Error{Code: events.CodeNotFound, Message: "tile level must be 0 to 7"})
		return
	}
	base := uint(level * 8)
	idx, width, full, err := tileParams(r.PathValue("n"), s.ledger.Head().Size>>base)
	if err != nil {
		writeError(w, err)
		return
	}
	hashes, err := s.ledger.ReadLevel(r.Context(), base, idx*layout.TileWidth, idx*layout.TileWidth+width)
	if err != nil {
		writeError(w, err)
		return
	}
	tileCache(w, full)
	out := make([]byte, 0, 32*len(hashes))
	for _, h := range hashes {
		out = append(out, h...)
	}
	_, _ = w.Write(out)
}

// entryBundle serves the stored bytes of events in the C2SP bundle format:
// each entry is a big-endian uint16 length followed by the bytes.
func (s *Server) entryBundle(w http.ResponseWriter, r *http.Request) {
	idx, width, full, err := tileParams(r.PathValue("n"), s.ledger.Head().Size)
	if err != nil {
		writeError(w, err)
		return
	}
	raws, err := s.ledger.ReadRaw(r.Context(), idx*layout.EntryBundleWidth, idx*layout.EntryBundleWidth+width)
	if err != nil {
		writeError(w, err)
		return
	}
	tileCache(w, full)
	var out []byte
	for _, b := range raws {
		out = binary.BigEndian.AppendUint16(out, uint16(len(b)))
		out = append(out, b...)
	}
	_, _ = w.Write(out)
}

func leafID(pos uint64) []compact.NodeID { return []compact.NodeID{compact.NewNodeID(0, pos)} }
