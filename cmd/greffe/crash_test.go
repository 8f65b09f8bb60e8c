package main

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/transparency-dev/merkle/testonly"

	"github.com/greffe/greffe/client"
	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/wire"
)

// greffeBin is the binary built once for the subprocess tests.
var greffeBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "greffe-bin-*")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	greffeBin = filepath.Join(dir, "greffe")
	out, err := exec.Command("go", "build", "-o", greffeBin, ".").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "build greffe: %v\n%s", err, out)
		os.Exit(2)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

var servingRE = regexp.MustCompile(`serving (https?://\S+)`)

// proc is a `greffe serve` subprocess.
type proc struct {
	cmd *exec.Cmd
	url string
}

// startServe runs `greffe serve` on a free loopback port and waits for it
// to print its URL (bounded).
func startServe(t *testing.T, data string, extra ...string) *proc {
	t.Helper()
	args := append([]string{"serve", "--data", data, "--http", "127.0.0.1:0", "--log-level", "warn"}, extra...)
	cmd := exec.Command(greffeBin, args...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = t.Output()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	urlc := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if m := servingRE.FindStringSubmatch(sc.Text()); m != nil {
				urlc <- m[1]
			}
		}
	}()
	select {
	case u := <-urlc:
		return &proc{cmd: cmd, url: u}
	case <-time.After(20 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("greffe serve did not start within 20s")
	}
	return nil
}

func (p *proc) kill9() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	_ = p.cmd.Wait()
}

// acked is what a client was told: the event's position and leaf hash.
type acked struct {
	stream   string
	position uint64
	leaf     [32]byte
	data     string
}

// TestCrash_KillNineKeepsAcknowledgedEvents is the durability proof of
// issue #2: concurrent writers append to a `greffe serve` subprocess, which
// is killed with SIGKILL at random moments (at least 20 times, bounded);
// after each restart every acknowledged event is present with the same
// position, bytes and leaf hash, positions are contiguous, and the Merkle
// root recomputed from the stored leaves equals the last signed
// checkpoint's root and the head's.
func TestCrash_KillNineKeepsAcknowledgedEvents(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test runs subprocesses")
	}
	data := t.TempDir()
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	ackedByID := map[uuid.UUID]acked{}
	var mu sync.Mutex
	const kills = 20
	deadline := time.Now().Add(3 * time.Minute)
	for round := 0; round < kills; round++ {
		if time.Now().After(deadline) {
			t.Fatalf("only %d kills within the time bound", round)
		}
		p := startServe(t, data)
		c := client.New(p.url, "")
		verifyAfterRestart(t, c, ackedByID)

		ctx, cancel := context.WithCancel(t.Context())
		var wg sync.WaitGroup
		for w := range 6 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; ctx.Err() == nil; i++ {
					stream := fmt.Sprintf("crash-%d-%d", round, w)
					n := 1 + (i % 3)
					in := make([]wire.EventIn, n)
					ids := make([]uuid.UUID, n)
					for k := range in {
						ids[k] = uuid.New()
						in[k] = wire.EventIn{ID: ids[k].String(), Type: "Crash", Data: []byte(fmt.Sprintf(`{"r":%d,"w":%d,"i":%d,"k":%d}`, round, w, i, k))}
					}
					out, err := c.Append(ctx, stream, events.ExpectAny, in)
					if err != nil {
						return // the node died: this append's outcome is unknown
					}
					mu.Lock()
					for k, e := range out.Events {
						ackedByID[ids[k]] = acked{stream: stream, position: e.Position, leaf: [32]byte(e.LeafHash), data: string(in[k].Data)}
					}
					mu.Unlock()
				}
			}()
		}
		time.Sleep(time.Duration(50+rng.IntN(400)) * time.Millisecond) // the kill moment is random by design
		p.kill9()
		cancel()
		wg.Wait()
	}
	p := startServe(t, data)
	defer p.kill9()
	verifyAfterRestart(t, client.New(p.url, ""), ackedByID)
	if len(ackedByID) < 200 {
		t.Fatalf("only %d events acknowledged over %d rounds: the test did not load the node", len(ackedByID), kills)
	}
	t.Logf("%d kills, %d acknowledged events all intact", kills, len(ackedByID))
}

func verifyAfterRestart(t *testing.T, c *client.Client, ackedByID map[uuid.UUID]acked) {
	t.Helper()
	ctx := t.Context()
	info, err := c.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	size := info.Head.Size
	// Every stored event, by position, through the tlog entry bundles (the
	// exact stored bytes).
	raws := make([][]byte, 0, size)
	for lo := uint64(0); lo < size; lo += 256 {
		path := fmt.Sprintf("/tlog/tile/entries/%s", tileN(lo/256, min(256, size-lo)))
		b, err := c.Get(ctx, path)
		if err != nil {
			t.Fatalf("bundle at %d: %v", lo, err)
		}
		for len(b) > 0 {
			n := int(binary.BigEndian.Uint16(b))
			raws = append(raws, b[2:2+n])
			b = b[2+n:]
		}
	}
	if uint64(len(raws)) != size {
		t.Fatalf("%d entries for size %d", len(raws), size)
	}
	ref := testonly.New(events.Hasher)
	byID := map[uuid.UUID]events.Event{}
	for i, raw := range raws {
		e, err := events.Decode(raw)
		if err != nil {
			t.Fatalf("position %d: %v", i, err)
		}
		if e.Position != uint64(i) {
			t.Fatalf("entry %d holds position %d: positions not contiguous", i, e.Position)
		}
		if _, dup := byID[e.ID]; dup {
			t.Fatalf("event id %s stored twice", e.ID)
		}
		byID[e.ID] = e
		ref.AppendData(raw)
	}
	for id, a := range ackedByID {
		e, ok := byID[id]
		if !ok {
			t.Fatalf("acknowledged event %s (position %d) lost", id, a.position)
		}
		if e.Position != a.position || e.LeafHash != a.leaf || string(e.Data) != a.data || e.Stream != a.stream {
			t.Fatalf("acknowledged event %s changed: stored at %d, acked at %d", id, e.Position, a.position)
		}
	}
	root := ref.Hash()
	if size == 0 {
		root = events.EmptyRoot[:]
	}
	if info.Head.Root != b64(root) {
		t.Fatalf("head root %s, recomputed %s", info.Head.Root, b64(root))
	}
	// The last signed checkpoint (stored before the crash or signed now)
	// verifies and matches the recomputed root at its size.
	note, err := c.Checkpoint(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	cp, _, err := events.OpenCheckpoint(note, info.Origin, verifiers(info.VerifierKeys)...)
	if err != nil {
		t.Fatal(err)
	}
	if cp.Size > size {
		t.Fatalf("checkpoint of %d beyond head %d", cp.Size, size)
	}
	want := events.EmptyRoot[:]
	if cp.Size > 0 {
		want = ref.HashAt(cp.Size)
	}
	if string(cp.Root[:]) != string(want) {
		t.Fatalf("checkpoint root at %d does not match the leaves", cp.Size)
	}
}

// tileN formats a C2SP tile index with an optional partial width.
func tileN(n, width uint64) string {
	s := fmt.Sprintf("%03d", n%1000)
	for n /= 1000; n > 0; n /= 1000 {
		s = fmt.Sprintf("x%03d/%s", n%1000, s)
	}
	if width < 256 {
		s += fmt.Sprintf(".p/%d", width)
	}
	return s
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }
