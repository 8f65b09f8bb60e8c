package replicator

import (
	"context"
	"log/slog"
	"strings"

	"github.com/hashicorp/go-hclog"
)

// Raft's logger: hashicorp/raft logs through hclog; its lines go to the
// replicator's slog.Logger, at their level.

// hclogWriter turns raft's hclog lines into slog records at their level.
type hclogWriter struct{ l *slog.Logger }

func (w hclogWriter) Write(b []byte) (int, error) {
	line := strings.TrimSpace(string(b))
	lv := slog.LevelInfo
	for tag, l := range map[string]slog.Level{"[ERROR]": slog.LevelError, "[WARN]": slog.LevelWarn, "[DEBUG]": slog.LevelDebug, "[TRACE]": slog.LevelDebug} {
		if i := strings.Index(line, tag); i >= 0 {
			lv = l
			line = strings.TrimSpace(line[i+len(tag):])
			break
		}
	}
	line = strings.TrimPrefix(line, "raft: ")
	w.l.Log(context.Background(), lv, line)
	return len(b), nil
}

func newHCLogger(l *slog.Logger) hclog.Logger {
	lv := hclog.Error
	switch {
	case l.Enabled(context.Background(), slog.LevelDebug):
		lv = hclog.Debug
	case l.Enabled(context.Background(), slog.LevelInfo):
		lv = hclog.Info
	case l.Enabled(context.Background(), slog.LevelWarn):
		lv = hclog.Warn
	}
	return hclog.New(&hclog.LoggerOptions{Name: "raft", Level: lv, Output: hclogWriter{l}, DisableTime: true})
}
