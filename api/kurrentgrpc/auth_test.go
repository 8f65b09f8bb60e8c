package kurrentgrpc

import (
	"crypto/tls"
	"errors"
	"testing"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"

	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/events/pebblelog"
	"github.com/greffe/greffe/internal/testcert"
)

// TestAuth_TokensOverTLS: with TLS and an Authenticator, the official client
// must present a known user and password (esdb://NAME:TOKEN@…): without
// them, or with a wrong password, a read is refused as unauthenticated; a
// read-only principal reads but its append is refused as access denied;
// a writer appends, recorded under its name as the actor.
func TestAuth_TokensOverTLS(t *testing.T) {
	st, err := pebblelog.Open(pebblelog.Config{Dir: t.TempDir(), CheckpointInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	seed(t, st, 1, "s")
	users := map[string]Principal{"w-token-0123456789": {Name: "writer", MayAppend: true}, "r-token-0123456789": {Name: "reader"}}
	srv, err := New(Config{Addr: "127.0.0.1:0", TLS: tlsConfig(t), Authenticate: func(user, password string) (Principal, bool) {
		p, ok := users[password]
		return p, ok && p.Name == user
	}}, st)
	if err != nil {
		t.Fatal(err)
	}
	addr, err := srv.Listen()
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve() }()
	defer func() {
		srv.Close()
		if err := <-served; err != nil {
			t.Errorf("serve: %v", err)
		}
	}()
	url := func(userinfo string) string {
		return "esdb://" + userinfo + addr.String() + "?tls=true&tlsVerifyCert=false"
	}
	code := func(err error) esdb.ErrorCode {
		var e *esdb.Error
		if !errors.As(err, &e) {
			return -1
		}
		return e.Code()
	}
	ctx := ctxT(t)

	for _, tc := range []struct{ name, userinfo string }{
		{"no credentials", ""},
		{"wrong password", "writer:r-token-0123456789@"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := connect(t, url(tc.userinfo))
			defer c.Close()
			rs, err := c.ReadStream(ctx, "s", esdb.ReadStreamOptions{}, 10)
			_, err = collect(t, rs, err)
			if code(err) != esdb.ErrorCodeUnauthenticated {
				t.Fatalf("read: %v, want ErrorCodeUnauthenticated", err)
			}
		})
	}

	reader := connect(t, url("reader:r-token-0123456789@"))
	defer reader.Close()
	rs, err := reader.ReadStream(ctx, "s", esdb.ReadStreamOptions{}, 10)
	if rows, err := collect(t, rs, err); err != nil || len(rows) != 1 {
		t.Fatalf("reader's read: %v %v, want the seeded event", rows, err)
	}
	if _, err := reader.AppendToStream(ctx, "s", esdb.AppendToStreamOptions{}, jsonEvent("A", 1)); code(err) != esdb.ErrorCodeAccessDenied {
		t.Fatalf("reader's append: %v, want ErrorCodeAccessDenied", err)
	}

	writer := connect(t, url("writer:w-token-0123456789@"))
	defer writer.Close()
	if _, err := writer.AppendToStream(ctx, "s", esdb.AppendToStreamOptions{}, jsonEvent("A", 2)); err != nil {
		t.Fatalf("writer's append: %v", err)
	}
	evs, err := st.ReadStream(ctx, "s", events.ReadOptions{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 2 || evs[1].Actor != "writer" {
		t.Fatalf("after the writer's append the stream holds %d events, last actor %q; want 2 and \"writer\"", len(evs), evs[len(evs)-1].Actor)
	}
}

// TestNew_NonLoopbackNeedsTLSAndAuth: a non-loopback address is refused
// unless both TLS and an Authenticator are configured.
func TestNew_NonLoopbackNeedsTLSAndAuth(t *testing.T) {
	auth := func(string, string) (Principal, bool) { return Principal{}, false }
	tlsCfg := tlsConfig(t)
	for _, tc := range []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{"neither", Config{Addr: "192.0.2.1:2113"}, false},
		{"TLS only", Config{Addr: "192.0.2.1:2113", TLS: tlsCfg}, false},
		{"auth only", Config{Addr: "192.0.2.1:2113", Authenticate: auth}, false},
		{"both", Config{Addr: "192.0.2.1:2113", TLS: tlsCfg, Authenticate: auth}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.cfg, nil) // New does not listen
			if tc.ok != (err == nil) || !tc.ok && !errors.Is(err, ErrInsecure) {
				t.Fatalf("New: %v, want ok=%v (else ErrInsecure)", err, tc.ok)
			}
		})
	}
}

func tlsConfig(t *testing.T) *tls.Config {
	cfg, _, _ := testcert.New(t, t.TempDir())
	return cfg
}
