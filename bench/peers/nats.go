package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/greffe/greffe/events"
)

// serveNats is the hidden serve-nats subcommand: a NATS server embedded in
// this process (nats-server/v2) with JetStream on file storage in dir,
// until SIGTERM or SIGINT. Once it accepts connections it prints its start
// line, {"url": …}, on stdout.
//
// Durability: SyncAlways (sync_interval: always in a configuration file),
// so that the file store fsyncs every message it stores before the
// publish is acknowledged; NATS's default is to sync every 2 minutes. The
// fsync check (fsyncs.go) counts it.
func serveNats(dir string) error {
	opts := &server.Options{
		Host:       "127.0.0.1",
		Port:       server.RANDOM_PORT,
		JetStream:  true,
		StoreDir:   dir,
		SyncAlways: true,
		NoLog:      true,
		NoSigs:     true,
	}
	s, err := server.NewServer(opts)
	if err != nil {
		return fmt.Errorf("nats server: %w", err)
	}
	go s.Start()
	defer func() {
		s.Shutdown()
		s.WaitForShutdown()
	}()
	if !s.ReadyForConnections(readyTimeout) {
		return fmt.Errorf("nats server not ready within %s", readyTimeout)
	}
	if !s.JetStreamEnabled() {
		return errors.New("nats server: JetStream is not enabled")
	}
	if err := printStartLine(s.ClientURL()); err != nil {
		return err
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
	return nil
}

// natsSystem runs serve-nats (this binary, re-executed) and drives it with
// nats.go's jetstream package: one connection shared by all writers, as
// NATS clients are meant to be used, and one stream, natsStream, on file
// storage with one replica and the server's default limits.
type natsSystem struct{ self string }

func (natsSystem) Name() string { return "nats" }

const (
	natsStream = "BENCH"
	// natsSubjects is natsStream's subjects: each writer publishes to
	// natsSubjectPrefix and its stream's name.
	natsSubjects      = "bench.>"
	natsSubjectPrefix = "bench."
)

func (s natsSystem) Start(ctx context.Context, dir string) (instance, error) {
	p, err := startServer(ctx, "serve-nats", []string{s.self, "serve-nats", "--dir", dir})
	if err != nil {
		return nil, err
	}
	inst, err := connectNats(ctx, p)
	if err != nil {
		_ = p.stop()
		return nil, err
	}
	return inst, nil
}

func connectNats(ctx context.Context, p *serverProc) (*natsInstance, error) {
	nc, err := nats.Connect(p.URL)
	if err != nil {
		return nil, fmt.Errorf("nats connect: %w", err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: natsStream, Subjects: []string{natsSubjects},
		Storage: jetstream.FileStorage, Replicas: 1}); err != nil {
		nc.Close()
		return nil, fmt.Errorf("create stream %s: %w", natsStream, err)
	}
	return &natsInstance{proc: p, nc: nc, js: js}, nil
}

type natsInstance struct {
	proc *serverProc
	nc   *nats.Conn
	js   jetstream.JetStream
}

// Append publishes one message and waits for its acknowledgement, or, for
// several events, publishes them all asynchronously, then waits for every
// acknowledgement: JetStream acknowledges a message once it is stored
// (with SyncAlways, synced).
func (n *natsInstance) Append(ctx context.Context, stream string, evs []events.Proposed) error {
	subject := natsSubjectPrefix + stream
	if len(evs) == 1 {
		_, err := n.js.Publish(ctx, subject, evs[0].Data)
		return err
	}
	acks := make([]jetstream.PubAckFuture, len(evs))
	for i, ev := range evs {
		f, err := n.js.PublishAsync(subject, ev.Data)
		if err != nil {
			return err
		}
		acks[i] = f
	}
	for _, f := range acks {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// ReadInOrder reads the stream from its first message with an ordered
// consumer (jetstream.OrderedConsumer: ephemeral, no acknowledgements,
// sequence gaps detected and recovered by the client) and its Messages
// iterator with the client's default pull batches, checking that stream
// sequences go 1, 2, 3, ….
func (n *natsInstance) ReadInOrder(ctx context.Context, want int) (int, error) {
	if want == 0 {
		return 0, nil
	}
	info, err := n.js.Stream(ctx, natsStream)
	if err != nil {
		return 0, err
	}
	held := int(info.CachedInfo().State.Msgs)
	want = min(want, held)
	cons, err := n.js.OrderedConsumer(ctx, natsStream, jetstream.OrderedConsumerConfig{})
	if err != nil {
		return 0, err
	}
	it, err := cons.Messages()
	if err != nil {
		return 0, err
	}
	defer it.Stop()
	got := 0
	for got < want {
		msg, err := it.Next(jetstream.NextContext(ctx))
		if err != nil {
			return got, err
		}
		meta, err := msg.Metadata()
		if err != nil {
			return got, err
		}
		if meta.Sequence.Stream != uint64(got)+1 {
			return got, fmt.Errorf("nats ordered consumer: stream sequence %d where %d was due", meta.Sequence.Stream, got+1)
		}
		got++
	}
	return got, nil
}

func (n *natsInstance) PID() int { return n.proc.pid() }

func (n *natsInstance) Close() error {
	n.nc.Close()
	return n.proc.stop()
}
