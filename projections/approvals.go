package projections

import (
	"strings"
	"time"

	"github.com/greffe/greffe/aggregates"
	"github.com/greffe/greffe/events"
)

// The approvals read model: every grant with its uses spent and left, its
// consumptions (by which command, on which subject) and its status at the
// query's time: an approval expires by time alone, so the status is
// computed at render time with aggregates.Approval.Status, the rule the
// gates apply.

type approvalFacts struct {
	ID           string              `json:"id"`
	Granted      bool                `json:"granted"`
	Approver     string              `json:"approver"`
	Principal    string              `json:"principal,omitempty"`
	Action       string              `json:"action"`
	Subject      string              `json:"subject"`
	Uses         int                 `json:"uses"`
	Used         int                 `json:"used"`
	ExpiresAt    time.Time           `json:"expires_at"`
	GrantedAt    time.Time           `json:"granted_at"`
	Conditions   []string            `json:"conditions"`
	Revoked      bool                `json:"revoked"`
	RevokedAt    time.Time           `json:"revoked_at"`
	RevokeReason string              `json:"revoke_reason"`
	Consumptions []Consumption       `json:"consumptions"`
	Grant        aggregates.EventRef `json:"grant"`
	Revocation   aggregates.EventRef `json:"revocation"`
}

// Consumption is one use of an approval.
type Consumption struct {
	By        string              `json:"by"`
	Subject   string              `json:"subject"`
	Use       int                 `json:"use"`
	Remaining int                 `json:"remaining"`
	At        time.Time           `json:"at"`
	Event     aggregates.EventRef `json:"event"`
}

type approvals struct {
	interner
	rows *table[approvalFacts]
}

func newApprovals(Env) Model { return &approvals{rows: newTable[approvalFacts]("a/")} }

var (
	grantKeys   = []string{"approver", "action", "subject", "uses", "expires_at", "conditions", "at", "principal"}
	consumeKeys = []string{"by", "subject", "use", "remaining", "at"}
	revokeKeys  = []string{"reason", "at"}
)

func (m *approvals) Apply(e *events.Event) error {
	if !strings.HasPrefix(e.Stream, aggregates.ApprovalPrefix) {
		return nil
	}
	id := strings.TrimPrefix(e.Stream, aggregates.ApprovalPrefix)
	var v [8][]byte
	switch e.Type {
	case aggregates.TypeApprovalGranted:
		fields(e.Data, grantKeys, v[:])
		a := m.rows.upsert(id)
		a.ID, a.Granted, a.Approver, a.Action, a.Subject = id, true, str(v[0]), str(v[1]), str(v[2])
		a.Uses, a.ExpiresAt, a.Conditions, a.GrantedAt, a.Principal = int(i64(v[3])), tm(v[4]), strs(v[5]), tm(v[6]), str(v[7])
		a.Grant = m.ref(e)
	case aggregates.TypeApprovalConsumed:
		fields(e.Data, consumeKeys, v[:])
		a := m.rows.upsert(id)
		a.Used++
		a.Consumptions = append(a.Consumptions, Consumption{By: str(v[0]), Subject: str(v[1]), Use: int(i64(v[2])), Remaining: int(i64(v[3])), At: tm(v[4]), Event: m.ref(e)})
	case aggregates.TypeApprovalRevoked:
		fields(e.Data, revokeKeys, v[:])
		a := m.rows.upsert(id)
		a.Revoked, a.RevokeReason, a.RevokedAt, a.Revocation = true, str(v[0]), tm(v[1]), m.ref(e)
	default:
		// A type this model does not read (one a later decider added):
		// nothing it shows depends on it.
		return nil
	}
	return nil
}

func (m *approvals) Flush(put func(string, []byte) error) error { return m.rows.flush(put) }

func (m *approvals) Load(key string, value []byte) error { return loadTables(key, value, m.rows.load) }

// ApprovalRow is one row of the approvals read model.
type ApprovalRow struct {
	Key        string `json:"key"`
	ApprovalID string `json:"approval_id"`
	Status     string `json:"status"`
	Approver   string `json:"approver"`
	// Principal is who sent the grant (its token's name; "anonymous" on a
	// node without tokens); absent from grants before issue #20.
	Principal    string               `json:"principal,omitempty"`
	Action       string               `json:"action"`
	Subject      string               `json:"subject"`
	Uses         int                  `json:"uses"`
	Used         int                  `json:"used"`
	Remaining    int                  `json:"remaining"`
	GrantedAt    time.Time            `json:"granted_at"`
	ExpiresAt    time.Time            `json:"expires_at"`
	Conditions   []string             `json:"conditions,omitempty"`
	Revoked      bool                 `json:"revoked"`
	RevokedAt    *time.Time           `json:"revoked_at,omitempty"`
	RevokeReason string               `json:"revoke_reason,omitempty"`
	Consumptions []Consumption        `json:"consumptions"`
	Grant        *aggregates.EventRef `json:"grant,omitempty"`
}

func (m *approvals) View(q Query) any {
	rows := []ApprovalRow{}
	for _, k := range m.rows.keys() {
		if q.Key != "" && k != q.Key {
			continue
		}
		f := m.rows.get(k)
		a := aggregates.Approval{ID: f.ID, Granted: f.Granted, Approver: f.Approver, Action: f.Action, Subject: f.Subject,
			Uses: f.Uses, Used: f.Used, ExpiresAt: f.ExpiresAt, Revoked: f.Revoked}
		r := ApprovalRow{Key: k, ApprovalID: k, Status: a.Status(q.Time), Approver: f.Approver, Principal: f.Principal, Action: f.Action, Subject: f.Subject,
			Uses: f.Uses, Used: f.Used, Remaining: a.Remaining(), GrantedAt: f.GrantedAt, ExpiresAt: f.ExpiresAt,
			Conditions: f.Conditions, Revoked: f.Revoked, RevokeReason: f.RevokeReason, Consumptions: f.Consumptions}
		if r.Consumptions == nil {
			r.Consumptions = []Consumption{}
		}
		if f.Revoked {
			t := f.RevokedAt
			r.RevokedAt = &t
		}
		if f.Granted {
			g := f.Grant
			r.Grant = &g
		}
		rows = append(rows, r)
	}
	return rows
}
