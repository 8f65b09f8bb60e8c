package executor

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// capture is one output stream of a run: it hashes every byte, keeps the
// first limit bytes for the excerpt, and (for stdout) parses metric lines
// as they pass, so the whole stream is read once and memory stays bounded
// whatever the process writes. Not safe for concurrent use: exec copies
// each stream on one goroutine.
type capture struct {
	limit int64
	sum   hash.Hash
	n     int64
	head  []byte
	// metrics, when non-nil, receives the stream's metric lines.
	metrics *metricParser
}

func newCapture(limit int64, metrics *metricParser) *capture {
	return &capture{limit: limit, sum: sha256.New(), metrics: metrics}
}

// Write never fails: a process is never blocked or killed for writing more
// than the cap; what is past the cap is hashed and counted, not kept.
func (c *capture) Write(p []byte) (int, error) {
	c.sum.Write(p)
	c.n += int64(len(p))
	if room := c.limit - int64(len(c.head)); room > 0 {
		c.head = append(c.head, p[:min(int64(len(p)), room)]...)
	}
	if c.metrics != nil {
		c.metrics.write(p)
	}
	return len(p), nil
}

// digest returns the hex SHA-256 of the whole stream.
func (c *capture) digest() string { return hex.EncodeToString(c.sum.Sum(nil)) }

// excerpt returns the kept head as valid UTF-8 of at most limit bytes, and
// whether it differs from the whole stream (bytes cut at the cap or at a
// rune boundary, or invalid UTF-8 replaced): the result records that as
// truncated rather than pretend the excerpt is the output.
func (c *capture) excerpt() (string, bool) {
	s := validPrefix(c.head, int(c.limit))
	return s, int64(len(s)) != c.n || s != string(c.head)
}

// validPrefix returns b as valid UTF-8 (each invalid byte replaced by
// U+FFFD) cut to at most max bytes at a rune boundary.
func validPrefix(b []byte, max int) string {
	var sb strings.Builder
	for len(b) > 0 {
		r, size := utf8.DecodeRune(b)
		w := utf8.RuneLen(r)
		if r == utf8.RuneError && size <= 1 {
			w = len(string(utf8.RuneError))
		}
		if sb.Len()+w > max {
			break
		}
		sb.WriteRune(r)
		b = b[size:]
	}
	return sb.String()
}

// Metric lines: "metric NAME VALUE [UNIT]", whitespace-separated, NAME of
// letters, digits and "_.:/-", VALUE a finite float. Other lines are
// output like any other. A name given twice keeps its last value (a
// benchmark may refine an estimate).
const (
	// maxMetricLine bounds the bytes buffered for one line; a longer line
	// is not a metric line and is skipped to its end.
	maxMetricLine = 4096
	// maxMetrics bounds how many distinct metrics one run records; later
	// names are dropped (counted in droppedMetrics).
	maxMetrics = 256
	// maxMetricName bounds a metric's name and unit, in bytes.
	maxMetricName = 128
)

type metricParser struct {
	line    []byte
	skip    bool // inside an overlong line
	values  map[string]float64
	units   map[string]string
	dropped int
}

func newMetricParser() *metricParser {
	return &metricParser{values: map[string]float64{}, units: map[string]string{}}
}

func (m *metricParser) write(p []byte) {
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		chunk := p
		if i >= 0 {
			chunk = p[:i]
		}
		if !m.skip {
			if len(m.line)+len(chunk) > maxMetricLine {
				m.skip, m.line = true, m.line[:0]
			} else {
				m.line = append(m.line, chunk...)
			}
		}
		if i < 0 {
			return
		}
		if !m.skip {
			m.parse(string(m.line))
		}
		m.line, m.skip = m.line[:0], false
		p = p[i+1:]
	}
}

// flush parses a last line without a newline.
func (m *metricParser) flush() {
	if !m.skip && len(m.line) > 0 {
		m.parse(string(m.line))
	}
	m.line, m.skip = m.line[:0], false
}

func (m *metricParser) parse(line string) {
	f := strings.Fields(line)
	if len(f) < 3 || len(f) > 4 || f[0] != "metric" || !metricName(f[1]) {
		return
	}
	v, err := strconv.ParseFloat(f[2], 64)
	if err != nil || math.IsInf(v, 0) || math.IsNaN(v) {
		return
	}
	if _, seen := m.values[f[1]]; !seen && len(m.values) >= maxMetrics {
		m.dropped++
		return
	}
	m.values[f[1]] = v
	delete(m.units, f[1])
	if len(f) == 4 && metricName(f[3]) {
		m.units[f[1]] = f[3]
	}
}

func metricName(s string) bool {
	if s == "" || len(s) > maxMetricName {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("_.:/-%", c)) {
			return false
		}
	}
	return true
}
