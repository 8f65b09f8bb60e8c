package kafka

import (
	"errors"
	"io"
	"log/slog"
	"net"
	"regexp"
	"time"

	"github.com/greffe/greffe/export"
	"github.com/greffe/greffe/internal/config"
)

// Config configures an Exporter. Zero values mean defaults; nothing can
// change while it runs.
type Config struct {
	// Brokers are the bootstrap brokers, HOST:PORT each. Required.
	Brokers []string
	// Topic receives the events. Required. It must exist: the exporter
	// never creates it, since its partition count and replication are the
	// operator's choice. Its partition count must not change while events
	// are exported (keys would move to other partitions, and per-stream
	// order with them).
	Topic string
	// From is the first position to export when the topic holds nothing
	// from this exporter yet. When it does, the exporter resumes from the
	// topic's tails, or from From if that is further. Default 0.
	From uint64
	// Until, when above 0, stops Run (with a nil error) once every event
	// below it is exported. Default 0: follow the log forever.
	Until uint64
	// MaxBatchEvents bounds the events of one write. Default 500.
	MaxBatchEvents int
	// MaxBatchBytes bounds the bytes of one write; it must stay below the
	// broker's message.max.bytes (1 MiB by default), since a write sends at
	// most one record batch per partition. Default 1,000,000. At least
	// 256 KiB, so that the largest event (64 KiB encoded) always fits.
	MaxBatchBytes int
	// WriteTimeout bounds one produce or metadata request. Default 10 s.
	WriteTimeout time.Duration
	// WriteAttempts is how many times kafka-go tries a batch before the
	// exporter backs off and resynchronises from the tails. Default 3.
	WriteAttempts int
	// MinBackoff and MaxBackoff bound the exponential wait after an error.
	// Defaults 100 ms and 30 s.
	MinBackoff, MaxBackoff time.Duration
	// Head returns the log's head size, for Lag. Default: the position
	// after the last event the exporter has seen.
	Head func() uint64
	// Progress, when set, is called on Run's goroutine after each write
	// Kafka acknowledged, with Exported().
	Progress func(exported uint64)
	// Logger receives retries and errors. Default: discard.
	Logger *slog.Logger
}

// loop is the run loop's part of c.
func (c *Config) loop() export.Config {
	logger := c.Logger
	if logger != nil {
		logger = logger.With("topic", c.Topic)
	}
	return export.Config{From: c.From, Until: c.Until, MinBackoff: c.MinBackoff, MaxBackoff: c.MaxBackoff,
		Buffer: eventBuffer, Progress: c.Progress, Logger: logger,
		Name: "kafka export", PositionKey: "exported", Resumes: "the partition tails"}
}

// Defaults of Config.
const (
	DefaultMaxBatchEvents = 500
	DefaultMaxBatchBytes  = 1_000_000
	minMaxBatchBytes      = 256 << 10
)

// ErrInvalidConfig wraps every configuration problem.
var ErrInvalidConfig = errors.New("kafka: invalid config")

// topicRE is Kafka's rule for topic names.
var topicRE = regexp.MustCompile(`^[a-zA-Z0-9._-]{1,249}$`)

func (c *Config) setDefaults() {
	if c.MaxBatchEvents == 0 {
		c.MaxBatchEvents = DefaultMaxBatchEvents
	}
	if c.MaxBatchBytes == 0 {
		c.MaxBatchBytes = DefaultMaxBatchBytes
	}
	if c.WriteTimeout == 0 {
		c.WriteTimeout = 10 * time.Second
	}
	if c.WriteAttempts == 0 {
		c.WriteAttempts = 3
	}
	if c.MinBackoff == 0 {
		c.MinBackoff = export.DefaultMinBackoff
	}
	if c.MaxBackoff == 0 {
		c.MaxBackoff = export.DefaultMaxBackoff
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
}

// Validate reports every problem of c at once. New applies the defaults
// first.
func (c *Config) Validate() error {
	var p config.Problems
	if len(c.Brokers) == 0 {
		p.Addf("Brokers: at least one HOST:PORT is required")
	}
	for i, b := range c.Brokers {
		if _, _, err := net.SplitHostPort(b); err != nil {
			p.Addf("Brokers[%d] %q: %v", i, b, err)
		}
	}
	if !topicRE.MatchString(c.Topic) {
		p.Addf("Topic %q: 1 to 249 of [a-zA-Z0-9._-]", c.Topic)
	}
	if c.MaxBatchEvents < 1 {
		p.Addf("MaxBatchEvents %d must be >= 1", c.MaxBatchEvents)
	}
	if c.MaxBatchBytes < minMaxBatchBytes {
		p.Addf("MaxBatchBytes %d must be >= %d (the largest event must fit)", c.MaxBatchBytes, minMaxBatchBytes)
	}
	if c.WriteTimeout < 0 || c.WriteAttempts < 1 {
		p.Addf("WriteTimeout %s must be >= 0 and WriteAttempts %d >= 1", c.WriteTimeout, c.WriteAttempts)
	}
	p = append(p, c.loop().Problems()...)
	return p.Err(ErrInvalidConfig)
}
