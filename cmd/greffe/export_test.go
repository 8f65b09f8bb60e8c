package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	kafkago "github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/greffe/greffe/client"
	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/export/kafka"
	"github.com/greffe/greffe/wire"
)

// appendEvents appends n events over a few streams through the node's API.
func appendEvents(t *testing.T, c *client.Client, n int) {
	t.Helper()
	for i := range n {
		if _, err := c.Append(t.Context(), fmt.Sprintf("cli-%d", i%4), events.ExpectAny, []wire.EventIn{{Type: "Tick", Data: fmt.Appendf(nil, `{"i":%d}`, i)}}); err != nil {
			t.Fatal(err)
		}
	}
}

// topicMessages counts the messages of a topic's partitions.
func topicMessages(t *testing.T, brokers []string, topic string, partitions int) int {
	t.Helper()
	kc := &kafkago.Client{Addr: kafkago.TCP(brokers...)}
	var reqs []kafkago.OffsetRequest
	for p := range partitions {
		reqs = append(reqs, kafkago.FirstOffsetOf(p), kafkago.LastOffsetOf(p))
	}
	offs, err := kc.ListOffsets(t.Context(), &kafkago.ListOffsetsRequest{Topics: map[string][]kafkago.OffsetRequest{topic: reqs}})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, po := range offs.Topics[topic] {
		n += int(po.LastOffset - po.FirstOffset)
	}
	return n
}

func TestCLI_ExportKafka(t *testing.T) {
	n := startNode(t)
	c := client.New(n.URL(), "")
	kc, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.SeedTopics(3, "ledger"))
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	brokers := "--brokers=" + strings.Join(kc.ListenAddrs(), ",")
	srv := "--server=" + n.URL()
	appendEvents(t, c, 40)

	type result struct {
		From     uint64 `json:"from"`
		Exported uint64 `json:"exported"`
		Skipped  uint64 `json:"skipped_at_tails"`
	}
	export := func(wantCode int, args ...string) (result, string) {
		t.Helper()
		code, out, errs := runCLI(t, "", append([]string{"export", "kafka", "--json", srv}, args...)...)
		if code != wantCode {
			t.Fatalf("export %v: exit %d, want %d\n%s%s", args, code, wantCode, out, errs)
		}
		var r result
		if code == exitOK {
			if err := json.Unmarshal([]byte(out), &r); err != nil {
				t.Fatalf("export output %q: %v", out, err)
			}
		}
		return r, errs
	}
	if r, _ := export(exitOK, brokers, "--topic=ledger"); r.Exported != 40 {
		t.Errorf("first export: %+v, want 40 exported", r)
	}
	// A second run resumes from the tails: only the new events are written.
	appendEvents(t, c, 10)
	if r, _ := export(exitOK, brokers, "--topic=ledger"); r.Exported != 50 {
		t.Errorf("second export: %+v, want 50 exported", r)
	}
	if got := topicMessages(t, kc.ListenAddrs(), "ledger", 3); got != 50 {
		t.Errorf("topic holds %d messages, want 50 (no duplicate)", got)
	}

	if _, errs := export(exitRefused, brokers, "--topic=absent"); !strings.Contains(errs, kafka.CodeTopicNotFound) {
		t.Errorf("missing topic: stderr %q, want %s", errs, kafka.CodeTopicNotFound)
	}
	if _, errs := export(exitCannot, "--topic=ledger"); !strings.Contains(errs, "Brokers") {
		t.Errorf("no brokers: stderr %q, want a usage error naming Brokers", errs)
	}
}

// TestCLI_ServeRefusesHalfAKafkaConfig checks that the serve flags reach
// the node: a topic without brokers refuses to start.
func TestCLI_ServeRefusesHalfAKafkaConfig(t *testing.T) {
	code, _, errs := runCLI(t, "", "serve", "--data", t.TempDir(), "--http", "127.0.0.1:0", "--log-level", "error", "--export-kafka-topic", "ledger")
	if code != exitCannot || !strings.Contains(errs, "--export-kafka-brokers") {
		t.Fatalf("serve: exit %d, stderr %q", code, errs)
	}
}
