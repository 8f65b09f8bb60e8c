package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"github.com/greffe/greffe/wire"
)

// Streams reads one page of the stream list (GET /v1/streams): the streams
// named with prefix that sort after after, at most limit (0: the node's
// default, 100). Pass the answer's Next as after for the next page.
func (c *Client) Streams(ctx context.Context, prefix, after string, limit int) (wire.StreamsOut, error) {
	q := url.Values{}
	if prefix != "" {
		q.Set("prefix", prefix)
	}
	if after != "" {
		q.Set("after", after)
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	p := "/v1/streams"
	if len(q) > 0 {
		p += "?" + q.Encode()
	}
	var out wire.StreamsOut
	err := c.Do(ctx, http.MethodGet, p, nil, &out)
	return out, err
}
