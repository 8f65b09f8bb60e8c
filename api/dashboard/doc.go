// Package dashboard holds greffe's web page: one hand-written HTML page,
// its stylesheet and its script, embedded in the binary (no CDN, no build
// step). The page reads the node's JSON APIs (projections, info,
// checkpoint, cluster status, readyz, metrics) and follows the log over the
// SSE endpoint; it shows the ledger's state apart from the readiness
// matrix's summary, the matrix with each row's probe schedule, the cluster,
// the missions board, the approvals, the measurements as charts, the live
// event tail and the verification status, and a banner when the node stops
// answering (docs/OPERATIONS.md, "The dashboard").
//
// The page and its assets are public; every data call carries the bearer
// token the reader typed, kept in the tab's sessionStorage only.
//
// It imports the standard library only; node mounts Handler on the API.
package dashboard
