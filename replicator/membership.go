package replicator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"
	"sync"
	"time"
	"unicode"

	"github.com/hashicorp/raft"

	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/wire"
)

func suffrage(s raft.ServerSuffrage) string {
	if s == raft.Voter {
		return "voter"
	}
	return "nonvoter"
}

// configuration returns the latest raft configuration.
func (p *Replicator) configuration() ([]raft.Server, error) {
	f := p.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return nil, p.translateOp(err)
	}
	return f.Configuration().Servers, nil
}

// Status queries every member (bounded by ctx and one second each) and
// returns this node's view. Members that do not answer are listed as
// unreachable.
func (p *Replicator) Status(ctx context.Context) (wire.Status, error) {
	servers, err := p.configuration()
	if err != nil {
		return wire.Status{}, err
	}
	addr, id := p.raft.LeaderWithID()
	self := p.info()
	st := wire.Status{NodeID: p.cfg.NodeID, State: p.raft.State().String(), Term: p.raft.CurrentTerm(),
		LeaderID: string(id), LeaderRaftAddr: string(addr), CommitIndex: p.raft.CommitIndex(),
		AppliedIndex: self.AppliedIndex, LastIndex: self.LastIndex, Restores: self.Restores}
	if v, err := strconv.ParseUint(p.raft.Stats()["last_snapshot_index"], 10, 64); err == nil {
		st.SnapshotIndex = v
	}
	st.TrailingLogs = p.raft.ReloadableConfig().TrailingLogs
	st.RefusedRPCs, st.RefusedConnections = p.trans.refusedCount(), p.refusals.conns.Load()
	st.RefusedSnapshots = p.fsm.refused.Load()
	infos := p.queryMembers(ctx, servers)
	for _, s := range servers {
		ss := wire.ServerStatus{ID: string(s.ID), RaftAddr: string(s.Address), Suffrage: suffrage(s.Suffrage), Leader: s.ID == id}
		in, ok := infos[string(s.ID)]
		if string(s.ID) == p.cfg.NodeID {
			in, ok = memberAnswer{info: self}, true
		}
		if ok && in.err == nil {
			ss.Reachable = true
			ss.HTTPURL, ss.State, ss.Term = in.info.HTTPURL, in.info.State, in.info.Term
			ss.AppliedIndex, ss.LastIndex, ss.HeadSize, ss.Restores = in.info.AppliedIndex, in.info.LastIndex, in.info.HeadSize, in.info.Restores
		} else if ok {
			ss.Error = in.err.Error()
		}
		st.Servers = append(st.Servers, ss)
	}
	slices.SortFunc(st.Servers, func(a, b wire.ServerStatus) int {
		switch {
		case a.ID < b.ID:
			return -1
		case a.ID > b.ID:
			return 1
		}
		return 0
	})
	return st, nil
}

type memberAnswer struct {
	info NodeInfo
	err  error
}

// queryMembers asks every other member who it is, concurrently, each bounded
// by infoTimeout. The goroutines end with their query.
func (p *Replicator) queryMembers(ctx context.Context, servers []raft.Server) map[string]memberAnswer {
	out := make(map[string]memberAnswer, len(servers))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, s := range servers {
		if string(s.ID) == p.cfg.NodeID {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			qctx, cancel := context.WithTimeout(ctx, infoTimeout)
			defer cancel()
			info, err := queryInfo(qctx, p.res.dialAddr(s.ID, s.Address), p.cfg.TLS, string(s.ID))
			if err == nil && info.NodeID != string(s.ID) {
				err = fmt.Errorf("%s answers as %q", s.Address, info.NodeID)
			}
			mu.Lock()
			out[string(s.ID)] = memberAnswer{info: info, err: err}
			mu.Unlock()
		}()
	}
	wg.Wait()
	return out
}

// refreshPeers records what every reachable member says (verifier keys,
// HTTP URL, progress); members that do not answer keep their last answer.
// It reports whether the leader said this node was removed: a member that
// leads in a term at least this node's says that its committed
// configuration, newer than the newest that listed this node, lacks it
// (removal.go). The answer comes from the member's address, and with TLS
// from a certificate naming that member (queryMembers).
func (p *Replicator) refreshPeers() (removed bool) {
	servers, err := p.configuration()
	if err != nil || len(servers) == 0 {
		return false // not a member yet (a joining node before its first entry)
	}
	answers := p.queryMembers(p.ctx, servers)
	term := p.raft.CurrentTerm()
	p.peersMu.Lock()
	defer p.peersMu.Unlock()
	for id, a := range answers {
		if a.err != nil {
			continue
		}
		p.peers[id] = a.info
		p.rememberKeys(id, a.info.VerifierKeys)
		if a.info.State == raft.Leader.String() && a.info.Term >= term && a.info.CommittedConfigIndex > 0 &&
			p.watch.leaderSays(a.info.CommittedConfigIndex, a.info.CommittedMembers) {
			removed = true
		}
	}
	return removed
}

// Verifiers returns the checkpoint verifier keys of every node this node
// has heard from: its own first, then the others' by node id. A node that
// was never reachable since this one started is missing until it answers.
func (p *Replicator) Verifiers() []string {
	out := append([]string(nil), p.cfg.Info().VerifierKeys...)
	seen := map[string]bool{}
	for _, k := range out {
		seen[k] = true
	}
	p.peersMu.Lock()
	ids := slices.Sorted(maps.Keys(p.knownKeys))
	for _, id := range ids {
		for _, k := range p.knownKeys[id] {
			if !seen[k] {
				seen[k] = true
				out = append(out, k)
			}
		}
	}
	p.peersMu.Unlock()
	return out
}

// peerKeysKey holds knownKeys (JSON) in the raft stable store.
var peerKeysKey = []byte("greffe_peer_verifier_keys")

func loadPeerKeys(logs *LogStore) (map[string][]string, error) {
	raw, err := logs.Get(peerKeysKey)
	if err != nil {
		return nil, err
	}
	out := map[string][]string{}
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &out); err != nil {
			return nil, fmt.Errorf("raft stable %s: %w", peerKeysKey, err)
		}
	}
	return out, nil
}

// rememberKeys adds the keys node id announced to knownKeys, and stores
// them when that changed anything. Keys are never forgotten, not even when
// the node is removed: its old checkpoints stay verifiable. REQUIRES:
// peersMu held.
func (p *Replicator) rememberKeys(id string, keys []string) {
	known := p.knownKeys[id]
	grown := false
	for _, k := range keys {
		if !slices.Contains(known, k) {
			known = append(known, k)
			grown = true
		}
	}
	if !grown {
		return
	}
	p.knownKeys[id] = known
	raw, err := json.Marshal(p.knownKeys)
	if err == nil {
		err = p.logs.Set(peerKeysKey, raw)
	}
	if err != nil {
		p.cfg.Logger.Warn("could not store the verifier keys of a peer", "node", id, "err", err)
	}
}

// promote makes caught-up non-voters voters. Leader only; called from the
// maintain loop right after refreshPeers.
func (p *Replicator) promote() {
	servers, err := p.configuration()
	if err != nil {
		return
	}
	commit := p.raft.CommitIndex()
	for _, s := range servers {
		if s.Suffrage != raft.Nonvoter {
			continue
		}
		p.peersMu.Lock()
		info, ok := p.peers[string(s.ID)]
		p.peersMu.Unlock()
		if !ok || info.AppliedIndex+promoteLag < commit {
			continue
		}
		f := p.raft.AddVoter(s.ID, s.Address, 0, p.cfg.ApplyTimeout)
		if err := f.Error(); err != nil {
			p.cfg.Logger.Warn("promote", "node", s.ID, "err", err)
			continue
		}
		p.cfg.Logger.Info("promoted to voter", "node", s.ID, "applied", info.AppliedIndex, "commit", commit)
	}
}

// translateOp maps the raft error of a membership operation. Unlike a
// proposal, a failure that raft explains (no suitable peer, a change in
// flight) is a plain failure; only a lost leadership leaves it open.
func (p *Replicator) translateOp(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipTransferInProgress):
		return p.notLeader()
	case errors.Is(err, raft.ErrLeadershipLost), errors.Is(err, raft.ErrRaftShutdown):
		return fmt.Errorf("%w: %v", events.ErrOutcomeUnknown, err)
	}
	return events.Errorf(wire.CodeReplicationFailed, events.KindFailed, err, "raft refused the operation")
}

// IsLeader reports whether this node is the raft leader right now (a
// local view, without a round trip: a deposed leader may still believe it
// for up to an election timeout). Use it for work only the leader should
// start, never as a read barrier (ReadBarrier is that).
func (p *Replicator) IsLeader() bool { return p.raft.State() == raft.Leader }

func (p *Replicator) requireLeader() error {
	if p.raft.State() != raft.Leader {
		return p.notLeader()
	}
	return nil
}

// validNodeID reports whether id is a usable server id: 1 to 64 printable
// characters without spaces or slashes.
func validNodeID(id string) bool {
	if id == "" || len(id) > 64 {
		return false
	}
	for _, c := range id {
		if !unicode.IsPrint(c) || unicode.IsSpace(c) || c == '/' {
			return false
		}
	}
	return true
}

// Join adds a node as a non-voter (leader only). Joining again with the
// same id and address is a no-op.
func (p *Replicator) Join(ctx context.Context, req wire.JoinRequest) error {
	if !validNodeID(req.NodeID) {
		return events.Refusef(events.CodeInvalidField, "node_id", "node id %q: use 1 to 64 printable characters without spaces or slashes", req.NodeID)
	}
	if host, port, err := net.SplitHostPort(req.RaftAddr); err != nil || host == "" || port == "0" {
		return events.Refusef(events.CodeInvalidField, "raft_addr", "raft address %q: use host:port that the leader can dial", req.RaftAddr)
	}
	if req.LedgerID != p.ledger.LedgerID() {
		return events.Errorf(wire.CodeLedgerMismatch, events.KindRefused, nil,
			"node %s holds ledger %q, this cluster holds %q; start it on an empty data folder", req.NodeID, req.LedgerID, p.ledger.LedgerID())
	}
	if err := p.requireLeader(); err != nil {
		return err
	}
	servers, err := p.configuration()
	if err != nil {
		return err
	}
	for _, s := range servers {
		sameID, sameAddr := string(s.ID) == req.NodeID, string(s.Address) == req.RaftAddr
		switch {
		case sameID && sameAddr:
			return nil
		case sameID || sameAddr:
			return events.Errorf(wire.CodeMemberConflict, events.KindRefused, nil,
				"member %s already has raft address %s; remove it first (greffe cluster remove %s)", s.ID, s.Address, s.ID)
		}
	}
	f := p.raft.AddNonvoter(raft.ServerID(req.NodeID), raft.ServerAddress(req.RaftAddr), 0, p.cfg.ApplyTimeout)
	if err := p.translateOp(f.Error()); err != nil {
		return err
	}
	p.cfg.Logger.Info("joined as non-voter", "node", req.NodeID, "raft_addr", req.RaftAddr)
	return nil
}

func (p *Replicator) member(id string) (raft.Server, error) {
	servers, err := p.configuration()
	if err != nil {
		return raft.Server{}, err
	}
	for _, s := range servers {
		if string(s.ID) == id {
			return s, nil
		}
	}
	return raft.Server{}, events.Errorf(wire.CodeUnknownNode, events.KindRefused, nil, "node %q is not a member; see greffe cluster status", id)
}

// Remove removes a member (leader only). A removed node stops its raft
// member and its process exits (Done). Removing the leader itself makes it
// step down first.
func (p *Replicator) Remove(ctx context.Context, id string) error {
	if err := p.requireLeader(); err != nil {
		return err
	}
	if _, err := p.member(id); err != nil {
		return err
	}
	f := p.raft.RemoveServer(raft.ServerID(id), 0, p.cfg.ApplyTimeout)
	if err := p.translateOp(f.Error()); err != nil {
		return err
	}
	p.peersMu.Lock()
	delete(p.peers, id)
	p.peersMu.Unlock()
	p.cfg.Logger.Info("removed", "node", id)
	return nil
}

// TransferLeadership hands leadership to the member to (any up-to-date
// voter when empty) and returns once it has (leader only).
func (p *Replicator) TransferLeadership(ctx context.Context, to string) error {
	if err := p.requireLeader(); err != nil {
		return err
	}
	var f raft.Future
	if to == "" {
		f = p.raft.LeadershipTransfer()
	} else {
		s, err := p.member(to)
		if err != nil {
			return err
		}
		if s.Suffrage != raft.Voter {
			return events.Errorf(wire.CodeReplicationFailed, events.KindRefused, nil, "node %s is a non-voter; it cannot lead until promoted", to)
		}
		f = p.raft.LeadershipTransferToServer(s.ID, s.Address)
	}
	return p.translateOp(f.Error())
}

// Leader returns the leader's HTTP base URL, with self true when this node
// leads. Without a known leader it returns *NotLeaderError; when the leader
// does not answer on its raft port, an *events.Error with CodeLeaderUnreachable.
func (p *Replicator) Leader(ctx context.Context) (url string, self bool, err error) {
	if p.raft.State() == raft.Leader {
		return p.cfg.Info().HTTPURL, true, nil
	}
	addr, id := p.raft.LeaderWithID()
	if id == "" {
		return "", false, &NotLeaderError{}
	}
	if string(id) == p.cfg.NodeID {
		// Raft names us while we already stepped down: no leader for now.
		return "", false, &NotLeaderError{}
	}
	p.leader.Lock()
	if p.leader.id == string(id) && p.leader.addr == string(addr) && time.Since(p.leader.at) < leaderURLTTL {
		u := p.leader.url
		p.leader.Unlock()
		return u, false, nil
	}
	p.leader.Unlock()
	qctx, cancel := context.WithTimeout(ctx, infoTimeout)
	defer cancel()
	info, err := queryInfo(qctx, p.res.dialAddr(id, addr), p.cfg.TLS, string(id))
	if err == nil && (info.NodeID != string(id) || info.HTTPURL == "") {
		err = fmt.Errorf("%s answers as %q with URL %q", addr, info.NodeID, info.HTTPURL)
	}
	if err != nil {
		return "", false, events.Errorf(wire.CodeLeaderUnreachable, events.KindFailed, err,
			"the leader %s does not answer; nothing was sent to it, retry", id)
	}
	p.leader.Lock()
	p.leader.id, p.leader.addr, p.leader.url, p.leader.at = string(id), string(addr), info.HTTPURL, time.Now()
	p.leader.Unlock()
	return info.HTTPURL, false, nil
}

// ForgetLeader drops the learned leader URL when it is url (a forward to it
// failed), so that the next Leader asks again.
func (p *Replicator) ForgetLeader(url string) {
	p.leader.Lock()
	defer p.leader.Unlock()
	if p.leader.url == url {
		p.leader.at = time.Time{}
	}
}
