// Package executor is greffe's GPU-local worker: the only process that runs
// on a GPU host, and the one whose word about that host the ledger takes,
// because it signs what it saw.
//
// An Executor follows a node's log over HTTP (Server-Sent Events filtered to
// the measurement (approvals included) and executor-key event types, resumed from a persisted
// position), picks the measurement requests addressed to its host, claims
// each with a lease it renews while working, does what the request asks if
// its host's own policy allows it (hostpolicy.go: a writer's request is
// never enough), and reports a MeasurementRecorded whose data is a DSSE
// envelope signed with its ed25519 key:
//
//   - run: an argv matching one of the policy's templates, without a
//     shell, in a fresh temporary directory, with the environment cleared
//     to an allowlist, bounded by the request's timeout (the whole process
//     group is killed) and output cap (truncation is recorded, never
//     hidden); metrics are parsed from stdout lines "metric NAME VALUE
//     [UNIT]"; never as root unless the policy says so;
//   - probe: an OpenAI-compatible endpoint's GET /v1/models, and for smoke
//     one bounded chat completion, to a host the policy lists, through a
//     dialer that checks every address after DNS (dial.go); statuses and
//     model ids are recorded, never bodies; the node records it as the
//     provider's ProbeRecorded;
//   - hash: artifact files under the policy's path prefixes (symlinks
//     resolved, read through an os.Root), hashed with a bounded buffer;
//     the node records them as the binding's ArtifactHashed events.
//
// What the policy does not allow may still run when an approver approved
// that exact request (MeasurementApproved; follow.go): the approval stands
// in for the policy's lists, never for root, an address class or a ".."
// path, and not at all when the policy sets ignore_approvals. Such a
// request waits unclaimed until it is approved. Any other request the
// policy refuses is answered at once with a signed result of outcome
// refused_by_host, its error naming the refusal's code and the policy's
// rule; nothing is done for it.
//
// Every result carries a resource snapshot taken before and after the work
// (nvidia-smi where present, MemAvailable, CPU count, hostname, executor
// version); a reading that could not be taken is recorded absent with its
// reason, never as zero.
//
// The gates are the node's: an unsigned result, one signed by an unknown or
// revoked key, for another argv or for a request this executor did not
// claim is refused there (aggregates/measurement.go). The executor never
// retries a measurement: a claim whose lease runs out is the node's to mark
// uncertain.
//
// The package imports events, aggregates (the command and payload types),
// wire (the API's bodies and codes), client (the HTTP client of a node)
// and the standard library; never api,
// commands, node or a store: it talks to a node over the network only.
package executor
