package api

import "github.com/greffe/greffe/client"

// Error is the API's error: a status, a stable code, a sentence saying what
// to fix, and optionally the JSON path of the bad field and details. It is
// the wire type of package client, so both ends share one definition.
type Error = client.Error

type errorBody = client.ErrorBody
