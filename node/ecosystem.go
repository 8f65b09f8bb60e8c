package node

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"

	"github.com/greffe/greffe/api/kurrentgrpc"
	"github.com/greffe/greffe/export/kafka"
)

// EcosystemConfig turns on the bridges to the tools other teams already
// use. Each part is off unless configured.
type EcosystemConfig struct {
	// Kafka exports the log to a Kafka topic when Brokers and Topic are
	// set (both or neither). Head and Logger are set by the node; the
	// exporter resumes from the topic's tails on every start.
	Kafka kafka.Config
	// GRPC serves the KurrentDB/EventStoreDB gRPC surface when Addr is set
	// (loopback only). Version and Logger are set by the node.
	GRPC kurrentgrpc.Config
}

// Ecosystem holds the running bridges; a field is nil when its part is off.
type Ecosystem struct {
	// Exporter is the Kafka exporter. Its Lag and Exported are safe to read
	// at any time (the metrics endpoint reads them).
	Exporter *kafka.Exporter
	// GRPC is the KurrentDB gRPC surface.
	GRPC *kurrentgrpc.Server
}

// errKafkaPair refuses half a Kafka configuration: brokers without a topic
// (or the reverse) is a typo, not a wish to export nothing.
var errKafkaPair = errors.New("node: the Kafka export needs both brokers and a topic (--export-kafka-brokers, --export-kafka-topic)")

// openEcosystem starts the configured bridges: the gRPC surface is bound
// and served at once (so a bad address fails Open), and the exporter runs
// on its own goroutine. Both are stopped by Close before the store closes.
//
// errGRPCTokensWithoutTLS: a node with tokens asks gRPC clients for them,
// and KurrentDB clients send credentials over TLS only; without TLS every
// call would be refused.
var errGRPCTokensWithoutTLS = errors.New("--grpc on a node with --tokens needs --tls-cert and --tls-key: KurrentDB clients send their credentials over TLS only")

// REQUIRES: n.Store is open.
func (n *Node) openEcosystem() error {
	cfg := n.cfg.Ecosystem
	n.Ecosystem = &Ecosystem{}
	if (len(cfg.Kafka.Brokers) > 0) != (cfg.Kafka.Topic != "") {
		return errKafkaPair
	}
	if cfg.GRPC.Addr != "" {
		gc := cfg.GRPC
		gc.Version = Version
		gc.Logger = n.cfg.Logger.With("component", "grpc")
		if gc.WriteTimeout == 0 {
			gc.WriteTimeout = n.cfg.API.WriteTimeout // serve --write-timeout bounds both surfaces
		}
		// The HTTP API's TLS certificate and tokens protect the gRPC
		// surface too: a token's name and value are the user and password
		// of esdb://NAME:TOKEN@host?tls=true.
		if n.cfg.API.TLSCert != "" && gc.TLS == nil {
			cert, err := tls.LoadX509KeyPair(n.cfg.API.TLSCert, n.cfg.API.TLSKey)
			if err != nil {
				return fmt.Errorf("grpc tls: %w", err)
			}
			gc.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
		}
		if n.cfg.API.Tokens.Enabled() && gc.TLS == nil {
			return errGRPCTokensWithoutTLS
		}
		if tokens := n.cfg.API.Tokens; tokens.Enabled() && gc.Authenticate == nil {
			gc.Authenticate = func(user, password string) (kurrentgrpc.Principal, bool) {
				p, ok := tokens.Identify(user, password)
				return kurrentgrpc.Principal{Name: p.Name, MayAppend: p.MayAppend()}, ok
			}
		}
		srv, err := kurrentgrpc.New(gc, n.Store)
		if err != nil {
			return err
		}
		addr, err := srv.Listen()
		if err != nil {
			return err
		}
		n.Ecosystem.GRPC = srv
		n.wg.Add(1)
		go func() {
			defer n.wg.Done()
			if err := srv.Serve(); err != nil {
				n.cfg.Logger.Error("grpc surface stopped", "err", err)
			}
		}()
		n.closers = append([]func() error{srv.Close}, n.closers...)
		n.cfg.Logger.Info("grpc serving the KurrentDB protocol", "addr", addr.String())
	}
	if len(cfg.Kafka.Brokers) > 0 {
		kc := cfg.Kafka
		st := n.Store
		kc.Head = func() uint64 { return st.Head().Size }
		kc.Logger = n.cfg.Logger.With("component", "kafka-export")
		ex, err := kafka.New(kc, st)
		if err != nil {
			return err
		}
		n.Ecosystem.Exporter = ex
		ex.Start(context.Background())
		// A failure that stopped the exporter was logged when it happened;
		// Close does not report it again as a failure to close.
		n.closers = append([]func() error{func() error { _ = ex.Stop(); return nil }}, n.closers...)
	}
	return nil
}
