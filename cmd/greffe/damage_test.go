package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"github.com/greffe/greffe/audit"
	"github.com/greffe/greffe/client"
	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/node"
	"github.com/greffe/greffe/wire"
)

// Issue #13, black-box: damaged storage through the real binary. A node
// restarted on a folder whose write-ahead log had a flipped byte started
// without a word, served a shorter ledger and gave acknowledged positions
// to new events; one started on a folder whose MANIFEST had a flipped byte
// wrote a new ledger id into it, and verify --data read it as an empty
// ledger. Now serve refuses to start, exit 2, in one sentence naming the
// file and what to do, and leaves the folder exactly as it found it;
// verify --data reports storage_corrupt naming the file, exit 1.

// walSegmentRecord is a record of a segment of the store's write-ahead
// log (<data>/ledger/greffe-wal/), read with the layout of the package
// doc of events/pebblelog/internal/wal: a 16-byte magic, then records of a
// 32-byte header crc32c(4) length(4) segment(8) seq(8) synced(8), little
// endian, the CRC covering everything after it, then the payload.
type walSegmentRecord struct {
	off, length int
	seq         uint64
}

// walSegmentRecords parses the segment numbered num up to the first bytes
// that are not a record (the end of what was written).
func walSegmentRecords(t *testing.T, b []byte, num uint64) []walSegmentRecord {
	t.Helper()
	const magicSize, headerSize = 16, 32
	if len(b) < magicSize || !bytes.HasPrefix(b, []byte("greffe-wal/2\n")) {
		t.Fatalf("segment %d does not start with the magic", num)
	}
	castagnoli := crc32.MakeTable(crc32.Castagnoli)
	var recs []walSegmentRecord
	for off := magicSize; off+headerSize <= len(b); {
		h := b[off : off+headerSize]
		n := int(binary.LittleEndian.Uint32(h[4:]))
		if binary.LittleEndian.Uint64(h[8:]) != num || n > len(b)-off-headerSize ||
			crc32.Checksum(b[off+4:off+headerSize+n], castagnoli) != binary.LittleEndian.Uint32(h) {
			break
		}
		recs = append(recs, walSegmentRecord{off: off, length: n, seq: binary.LittleEndian.Uint64(h[16:])})
		off += headerSize + n
	}
	return recs
}

// newestWALSegment returns the path and number of the newest segment of
// the store's log in data (free-*.wal files are emptied segments kept for
// reuse).
func newestWALSegment(t *testing.T, data string) (string, uint64) {
	t.Helper()
	dir := filepath.Join(node.LedgerDir(data), "greffe-wal")
	names, err := filepath.Glob(filepath.Join(dir, "*.wal"))
	if err != nil {
		t.Fatal(err)
	}
	names = slices.DeleteFunc(names, func(n string) bool { return strings.HasPrefix(filepath.Base(n), "free-") })
	if len(names) == 0 {
		t.Fatalf("no segment in %s", dir)
	}
	slices.Sort(names)
	newest := names[len(names)-1]
	var num uint64
	if _, err := fmt.Sscanf(strings.TrimSuffix(filepath.Base(newest), ".wal"), "%x", &num); err != nil {
		t.Fatal(err)
	}
	return newest, num
}

// folderState maps every file under dir to its size and SHA-256, Pebble's
// LOCK files left out (taking the lock may create one).
func folderState(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() == "LOCK" {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		rel, _ := filepath.Rel(dir, p)
		out[rel] = fmt.Sprintf("%d bytes, sha256 %s", len(b), hex.EncodeToString(sum[:8]))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// flipByte flips one bit of the byte at off of the file at p.
func flipByte(t *testing.T, p string, off int) {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	b[off] ^= 0x01
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// copyData copies a stopped node's data folder into a new temporary one.
func copyData(t *testing.T, data string) string {
	t.Helper()
	dst := t.TempDir()
	if err := os.CopyFS(dst, os.DirFS(data)); err != nil {
		t.Fatal(err)
	}
	return dst
}

// serveRefused runs `greffe serve` on data and returns its exit code and
// stderr once it exits, within 20 s. A serve that starts serving fails
// the test at once.
func serveRefused(t *testing.T, data string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, greffeBin, "serve", "--data", data, "--http", "127.0.0.1:0", "--log-level", "warn")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		if servingRE.MatchString(sc.Text()) {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			t.Fatalf("serve started on the damaged folder: %s", sc.Text())
		}
	}
	err = cmd.Wait()
	if ctx.Err() != nil {
		t.Fatalf("serve did not exit within 20s: %v", err)
	}
	return cmd.ProcessState.ExitCode(), stderr.String()
}

// checkRefusal checks serve's refusal of a damaged store: exit 2 (could
// not run), one line naming the file, saying the store is damaged and what
// to do, no Go panic or stack trace.
func checkRefusal(t *testing.T, code int, stderr, data, file string) {
	t.Helper()
	line := strings.TrimSpace(stderr)
	for _, want := range []string{"greffe: the store in " + data + " is damaged: " + file,
		"changed nothing in " + data, `"greffe verify --data ` + data + `"`, "greffe restore", "Disaster recovery"} {
		if !strings.Contains(line, want) {
			t.Errorf("serve's refusal does not say %q:\n%s", want, stderr)
		}
	}
	if code != exitCannot || strings.Contains(line, "\n") || strings.Contains(line, "panic") || strings.Contains(line, "goroutine ") {
		t.Errorf("serve: exit %d, want %d with one line and no stack trace:\n%s", code, exitCannot, stderr)
	}
}

// checkVerifyNames checks that verify --data reports damaged storage in
// file (relative to the ledger folder), at offset when it is not negative,
// exit 1, in text and in JSON, and does not pass for an empty ledger.
func checkVerifyNames(t *testing.T, data, file string, offset int64) {
	t.Helper()
	code, out, errs := runCLI(t, "", "verify", "--data", data)
	if code != exitRefused || !strings.Contains(out, "FAULT       store: storage_corrupt in "+file) || strings.Contains(out, "events      0 in 0 streams") {
		t.Errorf("verify --data: exit %d, want %d naming %s\n%s\n%s", code, exitRefused, file, out, errs)
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "storage_corrupt") && strings.Count(line, filepath.Base(file)) != 1 {
			t.Errorf("verify --data names %s more than once in its fault:\n%s", filepath.Base(file), line)
		}
	}
	code, out, _ = runCLI(t, "", "verify", "--data", data, "--json")
	var rep audit.Report
	if err := json.Unmarshal([]byte(out), &rep); code != exitRefused || err != nil || rep.First == nil ||
		rep.First.Kind != audit.KindStorageCorrupt || rep.First.File != file ||
		(offset >= 0 && (rep.First.Offset == nil || *rep.First.Offset != offset)) {
		t.Errorf("verify --data --json: exit %d, %v, first fault %+v; want %s in %s at offset %d", code, err, rep.First, audit.KindStorageCorrupt, file, offset)
	}
}

// stop stops the serve subprocess gracefully (SIGTERM) and waits, within
// 20 s, for it to exit 0.
func (p *proc) stop(t *testing.T) {
	t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve stopped with %v", err)
		}
	case <-time.After(20 * time.Second):
		_ = p.cmd.Process.Kill()
		<-done
		t.Fatal("serve did not stop within 20s of SIGTERM")
	}
}

// appendAcked appends n events to the node at c, count per append, and
// records what each acknowledgement said.
func appendAcked(t *testing.T, c *client.Client, n, count int, ackedByID map[uuid.UUID]acked) {
	t.Helper()
	for i := 0; i < n; i += count {
		stream := fmt.Sprintf("damage-%d", i%3)
		in := make([]wire.EventIn, count)
		ids := make([]uuid.UUID, count)
		for k := range in {
			ids[k] = uuid.New()
			in[k] = wire.EventIn{ID: ids[k].String(), Type: "Damage", Data: fmt.Appendf(nil, `{"i":%d}`, i+k)}
		}
		out, err := c.Append(t.Context(), stream, events.ExpectAny, in)
		if err != nil {
			t.Fatal(err)
		}
		for k, e := range out.Events {
			ackedByID[ids[k]] = acked{stream: stream, position: e.Position, leaf: [32]byte(e.LeafHash), data: string(in[k].Data)}
		}
	}
}

// TestServe_RefusesDamagedLogRecord is issue #13's first report: 83 events
// acknowledged one per append, kill -9, one byte flipped inside the
// payload of the third data record of the newest log segment (then, in a
// second case, of the last one: a sync record written after each fsync
// vouches for it, and after a process crash the page cache kept that
// record too). The node started without a word at head 2 and gave
// position 2, already acknowledged, to the next append. Now serve refuses
// to start, exit 2, naming the segment; the folder is left byte for byte
// as it was; verify --data reports storage_corrupt in that segment at the
// record's offset; with the byte flipped back the node serves every
// acknowledged event.
func TestServe_RefusesDamagedLogRecord(t *testing.T) {
	if testing.Short() {
		t.Skip("runs greffe serve subprocesses")
	}
	data := t.TempDir()
	p := startServe(t, data)
	ackedByID := map[uuid.UUID]acked{}
	appendAcked(t, client.New(p.url, ""), 83, 1, ackedByID)
	p.kill9()

	for _, tc := range []struct {
		name   string
		record func(recs []walSegmentRecord) walSegmentRecord
	}{
		{"third data record", func(recs []walSegmentRecord) walSegmentRecord { return recs[2] }},
		{"last data record", func(recs []walSegmentRecord) walSegmentRecord { return recs[len(recs)-1] }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := copyData(t, data)
			seg, num := newestWALSegment(t, d)
			b, err := os.ReadFile(seg)
			if err != nil {
				t.Fatal(err)
			}
			recs := slices.DeleteFunc(walSegmentRecords(t, b, num), func(r walSegmentRecord) bool { return r.seq == 0 })
			if len(recs) < 83 {
				t.Fatalf("%d data records in %s, want at least the 83 appends", len(recs), seg)
			}
			r := tc.record(recs)
			at := r.off + 32 + r.length/2
			flipByte(t, seg, at)
			before := folderState(t, d)

			code, stderr := serveRefused(t, d)
			checkRefusal(t, code, stderr, d, seg)
			if !strings.Contains(stderr, fmt.Sprintf("at offset %d", r.off)) {
				t.Errorf("serve's refusal does not give the record's offset %d:\n%s", r.off, stderr)
			}
			if diff := cmp.Diff(before, folderState(t, d)); diff != "" {
				t.Errorf("the refused start changed the data folder (-before +after):\n%s", diff)
			}
			checkVerifyNames(t, d, filepath.Join("greffe-wal", filepath.Base(seg)), int64(r.off))

			// The refusal cost nothing: the byte flipped back, the node
			// starts and serves every acknowledged event.
			flipByte(t, seg, at)
			p := startServe(t, d)
			defer p.kill9()
			verifyAfterRestart(t, client.New(p.url, ""), ackedByID)
		})
	}
}

// TestServe_RefusesDamagedManifest is issue #13's second report: a node
// holding 500 events, stopped cleanly, one byte flipped in the middle of
// its MANIFEST. serve wrote a new ledger id into the folder, then refused
// to start because the keys belonged to the old ledger (and Pebble, which
// saw fewer tables, could delete the others); verify --data read it as an
// empty ledger ("store_identity", "events 0 in 0 streams"). Now serve
// refuses to start, exit 2, naming the MANIFEST, and changes nothing in
// the folder (no file added, deleted or changed); verify --data reports
// storage_corrupt in the MANIFEST; with the original bytes back the node
// serves the same ledger id and the 500 events.
func TestServe_RefusesDamagedManifest(t *testing.T) {
	if testing.Short() {
		t.Skip("runs greffe serve subprocesses")
	}
	data := t.TempDir()
	p := startServe(t, data)
	c := client.New(p.url, "")
	ackedByID := map[uuid.UUID]acked{}
	appendAcked(t, c, 500, 10, ackedByID)
	info, err := c.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	p.stop(t)

	manifests, err := filepath.Glob(filepath.Join(node.LedgerDir(data), "MANIFEST-*"))
	if err != nil || len(manifests) != 1 {
		t.Fatalf("MANIFEST files of a cleanly stopped node: %v %v", manifests, err)
	}
	manifest := manifests[0]
	original, err := os.ReadFile(manifest)
	if err != nil {
		t.Fatal(err)
	}
	flipByte(t, manifest, len(original)/2)
	before := folderState(t, data)

	code, stderr := serveRefused(t, data)
	checkRefusal(t, code, stderr, data, manifest)
	if diff := cmp.Diff(before, folderState(t, data)); diff != "" {
		t.Errorf("the refused start changed the data folder (-before +after):\n%s", diff)
	}
	checkVerifyNames(t, data, filepath.Base(manifest), -1)

	// The original MANIFEST back: the same ledger, every event.
	if err := os.WriteFile(manifest, original, 0o600); err != nil {
		t.Fatal(err)
	}
	p = startServe(t, data)
	defer p.kill9()
	c = client.New(p.url, "")
	got, err := c.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if got.LedgerID != info.LedgerID || got.Head.Size != 500 {
		t.Fatalf("after the refusal: ledger %s with %d events, want %s with 500", got.LedgerID, got.Head.Size, info.LedgerID)
	}
	verifyAfterRestart(t, c, ackedByID)
}
