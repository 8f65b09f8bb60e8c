package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"

	"github.com/greffe/greffe/events"
)

// serveEtcd is the hidden serve-etcd subcommand: one etcd member embedded
// in this process (go.etcd.io/etcd/server/v3/embed) with its data in dir,
// until SIGTERM or SIGINT. Once it serves it prints its start line,
// {"url": …}, on stdout.
//
// Durability is etcd's default: the member fdatasyncs its write-ahead log
// before it applies and acknowledges a proposal (UnsafeNoFsync, off by
// default, is never set), and commits its bbolt backend every
// BackendBatchInterval (100 ms). The fsync check (fsyncs.go) counts it.
func serveEtcd(dir string) error {
	clientPort, err := freePort()
	if err != nil {
		return err
	}
	peerPort, err := freePort()
	if err != nil {
		return err
	}
	clientURL := url.URL{Scheme: "http", Host: hostPort(clientPort)}
	peerURL := url.URL{Scheme: "http", Host: hostPort(peerPort)}
	cfg := embed.NewConfig()
	cfg.Dir = dir
	cfg.LogLevel = "error"
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{clientURL}, []url.URL{clientURL}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peerURL}, []url.URL{peerURL}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	if cfg.UnsafeNoFsync {
		return errors.New("etcd's defaults changed: UnsafeNoFsync is on")
	}
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return fmt.Errorf("start etcd: %w", err)
	}
	defer e.Close()
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(readyTimeout):
		return fmt.Errorf("etcd not ready within %s", readyTimeout)
	}
	if err := printStartLine(clientURL.String()); err != nil {
		return err
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	select {
	case <-sig:
		return nil
	case err := <-e.Err():
		return fmt.Errorf("etcd: %w", err)
	}
}

// etcdSystem runs serve-etcd (this binary, re-executed) and drives it with
// clientv3: one client, one gRPC connection shared by all writers, as
// clientv3 is meant to be used.
type etcdSystem struct{ self string }

func (etcdSystem) Name() string { return "etcd" }

// etcdReadPage is how many keys one Range of shape D returns.
const etcdReadPage = 10_000

// etcdPrefix holds every key the harness writes: etcdPrefix and a
// 16-digit sequence number, so that key order is the order in which the
// writers took their numbers.
const etcdPrefix = "e/"

func (s etcdSystem) Start(ctx context.Context, dir string) (instance, error) {
	p, err := startServer(ctx, "serve-etcd", []string{s.self, "serve-etcd", "--dir", dir})
	if err != nil {
		return nil, err
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{p.URL}, DialTimeout: 10 * time.Second,
		Logger: zap.NewNop()})
	if err != nil {
		_ = p.stop()
		return nil, fmt.Errorf("etcd client: %w", err)
	}
	return &etcdInstance{proc: p, cli: cli}, nil
}

type etcdInstance struct {
	proc *serverProc
	cli  *clientv3.Client
	next atomic.Uint64 // the next key's sequence number
}

func etcdKey(seq uint64) string {
	b := make([]byte, 0, len(etcdPrefix)+16)
	b = append(b, etcdPrefix...)
	s := strconv.FormatUint(seq, 10)
	for range 16 - len(s) {
		b = append(b, '0')
	}
	return string(append(b, s...))
}

// Append is one Put for one event, a Txn of len(evs) Puts otherwise: etcd
// acknowledges either once it is in its write-ahead log, synced.
func (e *etcdInstance) Append(ctx context.Context, _ string, evs []events.Proposed) error {
	first := e.next.Add(uint64(len(evs))) - uint64(len(evs))
	if len(evs) == 1 {
		_, err := e.cli.Put(ctx, etcdKey(first), string(evs[0].Data))
		return err
	}
	ops := make([]clientv3.Op, len(evs))
	for i, ev := range evs {
		ops[i] = clientv3.OpPut(etcdKey(first+uint64(i)), string(ev.Data))
	}
	resp, err := e.cli.Txn(ctx).Then(ops...).Commit()
	if err == nil && !resp.Succeeded {
		err = errors.New("etcd: txn without condition did not succeed")
	}
	return err
}

// ReadInOrder reads the keys in order with Range requests of etcdReadPage
// keys (linearizable, etcd's default), each starting after the last key
// of the one before.
func (e *etcdInstance) ReadInOrder(ctx context.Context, n int) (int, error) {
	got, from, end := 0, etcdPrefix, clientv3.GetPrefixRangeEnd(etcdPrefix)
	prev := ""
	for got < n {
		resp, err := e.cli.Get(ctx, from, clientv3.WithRange(end), clientv3.WithLimit(int64(min(etcdReadPage, n-got))))
		if err != nil {
			return got, err
		}
		for _, kv := range resp.Kvs {
			if k := string(kv.Key); k <= prev {
				return got, fmt.Errorf("etcd range: key %q after %q", k, prev)
			}
			prev = string(kv.Key)
			got++
		}
		if len(resp.Kvs) == 0 || !resp.More {
			break
		}
		from = prev + "\x00"
	}
	return got, nil
}

func (e *etcdInstance) PID() int { return e.proc.pid() }

func (e *etcdInstance) Close() error {
	err := e.cli.Close()
	if errors.Is(err, context.Canceled) {
		err = nil
	}
	return errors.Join(err, e.proc.stop())
}
