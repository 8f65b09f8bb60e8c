package node

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"
	"github.com/google/uuid"
	kafkago "github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/greffe/greffe/api"
	"github.com/greffe/greffe/api/kurrentgrpc"
	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/export/kafka"
	"github.com/greffe/greffe/internal/testcert"
	"github.com/greffe/greffe/replicator"
)

// TestNode_Ecosystem opens a node with both bridges on: an event appended
// with the official KurrentDB client over the node's gRPC surface reaches
// the Kafka topic through the node's exporter, and Close stops both.
func TestNode_Ecosystem(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	kc, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.SeedTopics(3, "ledger"))
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	exported := make(chan uint64, 16)
	n, err := Open(Config{
		DataDir: t.TempDir(),
		API:     api.Config{Addr: "127.0.0.1:0"},
		Ecosystem: EcosystemConfig{
			GRPC: kurrentgrpc.Config{Addr: "127.0.0.1:0"},
			Kafka: kafka.Config{Brokers: kc.ListenAddrs(), Topic: "ledger", Progress: func(ex uint64) {
				select {
				case exported <- ex:
				default: // the test only needs the latest values
				}
			}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	cfg, err := esdb.ParseConnectionString(fmt.Sprintf("esdb://%s?tls=false", n.Ecosystem.GRPC.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Logger = esdb.NoopLogging()
	c, err := esdb.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	id := uuid.New()
	if _, err := c.AppendToStream(ctx, "orders-1", esdb.AppendToStreamOptions{ExpectedRevision: esdb.NoStream{}},
		esdb.EventData{EventID: id, EventType: "OrderPlaced", ContentType: esdb.ContentTypeJson, Data: []byte(`{"qty":1}`)}); err != nil {
		t.Fatal(err)
	}
	for ex := uint64(0); ex < 1; {
		select {
		case ex = <-exported:
		case <-ctx.Done():
			t.Fatalf("the event was not exported: lag %d", n.Ecosystem.Exporter.Lag())
		}
	}
	if lag := n.Ecosystem.Exporter.Lag(); lag != 0 {
		t.Errorf("lag %d after export, want 0", lag)
	}
	kcl := &kafkago.Client{Addr: kafkago.TCP(kc.ListenAddrs()...)}
	p := kafka.PartitionOf("orders-1", 3)
	resp, err := kcl.Fetch(ctx, &kafkago.FetchRequest{Topic: "ledger", Partition: p, Offset: 0, MinBytes: 1, MaxBytes: 1 << 20, MaxWait: time.Second})
	if err != nil || resp.Error != nil {
		t.Fatalf("fetch: %v %v", err, resp.Error)
	}
	rec, err := resp.Records.ReadRecord()
	if err != nil {
		t.Fatal(err)
	}
	if pos, ok := kafka.HeaderUint(rec.Headers, kafka.HeaderPosition); !ok || pos != 0 {
		t.Errorf("exported message position %d (%v), want 0", pos, ok)
	}
	if err := n.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := c.AppendToStream(ctx, "orders-1", esdb.AppendToStreamOptions{}, esdb.EventData{EventType: "Late", ContentType: esdb.ContentTypeJson, Data: []byte(`{}`)}); err == nil {
		t.Errorf("append after Close succeeded")
	}
}

func TestNode_EcosystemRefusesHalfAKafkaConfig(t *testing.T) {
	_, err := Open(Config{DataDir: t.TempDir(), API: api.Config{Addr: "127.0.0.1:0"},
		Ecosystem: EcosystemConfig{Kafka: kafka.Config{Topic: "ledger"}}})
	if !errors.Is(err, errKafkaPair) {
		t.Fatalf("Open: %v, want %v", err, errKafkaPair)
	}
}

// TestNode_GRPCUsesTheAPITokensAndTLS: the node's gRPC surface serves the
// HTTP API's certificate and accepts its tokens as esdb:// user and
// password; the writer's appends are recorded under its token's name and a
// reader's are refused.
func TestNode_GRPCUsesTheAPITokensAndTLS(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	dir := t.TempDir()
	_, certFile, keyFile := testcert.New(t, dir)
	tokens, err := api.NewTokens([]api.Token{{Name: "ci", Role: api.RoleWriter, Token: "writer-token-0123456789"},
		{Name: "dash", Role: api.RoleReader, Token: "reader-token-0123456789"}})
	if err != nil {
		t.Fatal(err)
	}
	n, err := Open(Config{DataDir: filepath.Join(dir, "data"),
		API:       api.Config{Addr: "127.0.0.1:0", Tokens: tokens, TLSCert: certFile, TLSKey: keyFile},
		Ecosystem: EcosystemConfig{GRPC: kurrentgrpc.Config{Addr: "127.0.0.1:0"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	client := func(userinfo string) *esdb.Client {
		cfg, err := esdb.ParseConnectionString(fmt.Sprintf("esdb://%s@%s?tls=true&tlsVerifyCert=false", userinfo, n.Ecosystem.GRPC.Addr()))
		if err != nil {
			t.Fatal(err)
		}
		cfg.Logger = esdb.NoopLogging()
		c, err := esdb.NewClient(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	event := esdb.EventData{EventType: "OrderPlaced", ContentType: esdb.ContentTypeJson, Data: []byte(`{"qty":1}`)}
	if _, err := client("ci:writer-token-0123456789").AppendToStream(ctx, "orders-1", esdb.AppendToStreamOptions{}, event); err != nil {
		t.Fatalf("writer's append: %v", err)
	}
	var esErr *esdb.Error
	_, err = client("dash:reader-token-0123456789").AppendToStream(ctx, "orders-1", esdb.AppendToStreamOptions{}, event)
	if !errors.As(err, &esErr) || esErr.Code() != esdb.ErrorCodeAccessDenied {
		t.Fatalf("reader's append: %v, want ErrorCodeAccessDenied", err)
	}
	evs, err := n.Store.ReadStream(ctx, "orders-1", events.ReadOptions{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 1 || evs[0].Actor != "ci" {
		t.Fatalf("orders-1 holds %d events (first actor %q); want 1 appended by \"ci\"", len(evs), evs[0].Actor)
	}
}

// TestNode_RaftTLSNeedsAllThreeFiles: a raft certificate without its key
// or the cluster CA refuses to start instead of running plain TCP; with all
// three (the certificate names the node's id), a bootstrapped node leads
// over its TLS raft port.
func TestNode_RaftTLSNeedsAllThreeFiles(t *testing.T) {
	dir := t.TempDir()
	ca := testcert.NewCA(t, dir)
	cert, key := ca.IssueURI(t, dir, "n1", replicator.NodeURI("n1").String())
	n, err := Open(Config{DataDir: filepath.Join(dir, "half"), API: api.Config{Addr: "127.0.0.1:0"},
		Cluster: ClusterConfig{RaftAddr: "127.0.0.1:0", Bootstrap: true, RaftTLSCert: cert}})
	if err == nil {
		n.Close()
		t.Fatal("a node opened with a raft certificate but no key or CA")
	}
	if !strings.Contains(err.Error(), "all three") {
		t.Fatalf("Open: %v, want the message naming the three flags", err)
	}
	n, err = Open(Config{DataDir: filepath.Join(dir, "full"), API: api.Config{Addr: "127.0.0.1:0"},
		Cluster: ClusterConfig{RaftAddr: "127.0.0.1:0", Bootstrap: true, RaftTLSCert: cert, RaftTLSKey: key, RaftTLSCA: ca.File}})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	deadline := time.Now().Add(10 * time.Second)
	for n.Ready().Leader != "n1" {
		if time.Now().After(deadline) {
			t.Fatalf("n1 did not lead over TLS: %+v", n.Ready())
		}
		time.Sleep(20 * time.Millisecond)
	}
}
