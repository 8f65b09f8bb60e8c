// Package faultfs wraps a Pebble vfs.FS to inject storage faults into the
// real code paths of greffe's durable state (the ledger's Pebble and
// write-ahead log, the raft log store, snapshots), the way Pebble tests
// itself with vfs/errorfs. It is for tests: nothing in a node uses it.
//
// Beyond errorfs it models how Linux reports a failed fsync (fsyncgate):
// the kernel reports a writeback error once, to one fsync, marks the pages
// clean and drops them; a later fsync of the same file returns 0 although
// that data never reached the disk. Here, once a sync of a file failed,
// every later sync of that file returns nil without syncing anything, so a
// store that retries an fsync and trusts it is caught by a simulated power
// loss (vfs.NewCrashableMem's CrashClone keeps only synced data).
package faultfs

import (
	"io"
	"os"
	"sync"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
)

// FS injects the errors of an errorfs.Injector before each operation; an
// operation that gets an error is not performed. Safe for concurrent use.
type FS struct {
	vfs.FS
	inj errorfs.Injector

	mu   sync.Mutex
	lost map[string]bool // files whose sync failed: later syncs lie
}

// Wrap returns fs with faults from inj.
func Wrap(fs vfs.FS, inj errorfs.Injector) *FS {
	return &FS{FS: fs, inj: inj, lost: map[string]bool{}}
}

var _ vfs.FS = (*FS)(nil)

// Lost reports whether a sync of the file at path failed.
func (f *FS) Lost(path string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lost[path]
}

func (f *FS) setLost(path string) {
	f.mu.Lock()
	f.lost[path] = true
	f.mu.Unlock()
}

func (f *FS) maybe(kind errorfs.OpKind, path string) error {
	return f.inj.MaybeError(errorfs.Op{Kind: kind, Path: path})
}

// Holder is an optional interface of an Injector: Hold is called once an
// operation is let through, and what it returns once the operation ended.
// FS uses it around Link, ReuseForWrite and Lock only. Pebble's crashable
// MemFS (v2.1.7) takes its clone lock for reading twice, nested, in those
// three (Link, then its walk's callback; ReuseForWrite, then Rename; Lock,
// then Create; cockroachdb/pebble#5993, fixed upstream after v2.1.7): a
// CrashClone whose write lock comes between the two waits for the outer
// read lock while the inner one waits behind it, for ever. Seen as a
// ten-minute hang of TestReplicator_ClusterPowerLoss: a snapshot's Pebble
// checkpoint linking a table while the test cut the power. An injector
// that clones (the power-loss gate) holds those two off while it does.
type Holder interface {
	Hold(op errorfs.Op) (release func())
}

// held runs op's file-system call under the injector's Hold, if it has one.
func (f *FS) held(kind errorfs.OpKind, path string) func() {
	if h, ok := f.inj.(Holder); ok {
		return h.Hold(errorfs.Op{Kind: kind, Path: path})
	}
	return func() {}
}

func (f *FS) wrap(path string, file vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return nil, err
	}
	return &faultFile{File: file, fs: f, path: path}, nil
}

// Unwrap returns the wrapped file system.
func (f *FS) Unwrap() vfs.FS { return f.FS }

func (f *FS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	if err := f.maybe(errorfs.OpCreate, name); err != nil {
		return nil, err
	}
	file, err := f.FS.Create(name, c)
	return f.wrap(name, file, err)
}

func (f *FS) Link(oldname, newname string) error {
	if err := f.maybe(errorfs.OpLink, oldname); err != nil {
		return err
	}
	defer f.held(errorfs.OpLink, oldname)()
	return f.FS.Link(oldname, newname)
}

func (f *FS) Open(name string, opts ...vfs.OpenOption) (vfs.File, error) {
	if err := f.maybe(errorfs.OpOpen, name); err != nil {
		return nil, err
	}
	file, err := f.FS.Open(name, opts...)
	return f.wrap(name, file, err)
}

func (f *FS) OpenReadWrite(name string, c vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	if err := f.maybe(errorfs.OpOpen, name); err != nil {
		return nil, err
	}
	file, err := f.FS.OpenReadWrite(name, c, opts...)
	return f.wrap(name, file, err)
}

func (f *FS) OpenDir(name string) (vfs.File, error) {
	if err := f.maybe(errorfs.OpOpenDir, name); err != nil {
		return nil, err
	}
	file, err := f.FS.OpenDir(name)
	return f.wrap(name, file, err)
}

func (f *FS) Remove(name string) error {
	if err := f.maybe(errorfs.OpRemove, name); err != nil {
		return err
	}
	return f.FS.Remove(name)
}

func (f *FS) RemoveAll(name string) error {
	if err := f.maybe(errorfs.OpRemoveAll, name); err != nil {
		return err
	}
	return f.FS.RemoveAll(name)
}

func (f *FS) Rename(oldname, newname string) error {
	if err := f.maybe(errorfs.OpRename, oldname); err != nil {
		return err
	}
	f.mu.Lock()
	if f.lost[oldname] {
		f.lost[newname] = true
	}
	f.mu.Unlock()
	return f.FS.Rename(oldname, newname)
}

func (f *FS) ReuseForWrite(oldname, newname string, c vfs.DiskWriteCategory) (vfs.File, error) {
	if err := f.maybe(errorfs.OpReuseForWrite, oldname); err != nil {
		return nil, err
	}
	release := f.held(errorfs.OpReuseForWrite, oldname)
	file, err := f.FS.ReuseForWrite(oldname, newname, c)
	release()
	return f.wrap(newname, file, err)
}

func (f *FS) MkdirAll(dir string, perm os.FileMode) error {
	if err := f.maybe(errorfs.OpMkdirAll, dir); err != nil {
		return err
	}
	return f.FS.MkdirAll(dir, perm)
}

func (f *FS) Lock(name string) (io.Closer, error) {
	if err := f.maybe(errorfs.OpLock, name); err != nil {
		return nil, err
	}
	defer f.held(errorfs.OpLock, name)()
	return f.FS.Lock(name)
}

func (f *FS) List(dir string) ([]string, error) {
	if err := f.maybe(errorfs.OpList, dir); err != nil {
		return nil, err
	}
	return f.FS.List(dir)
}

func (f *FS) Stat(name string) (vfs.FileInfo, error) {
	if err := f.maybe(errorfs.OpStat, name); err != nil {
		return nil, err
	}
	return f.FS.Stat(name)
}

type faultFile struct {
	vfs.File
	fs   *FS
	path string
}

func (f *faultFile) Read(p []byte) (int, error) {
	if err := f.fs.maybe(errorfs.OpFileRead, f.path); err != nil {
		return 0, err
	}
	return f.File.Read(p)
}

func (f *faultFile) ReadAt(p []byte, off int64) (int, error) {
	if err := f.fs.inj.MaybeError(errorfs.Op{Kind: errorfs.OpFileReadAt, Path: f.path, Offset: off}); err != nil {
		return 0, err
	}
	return f.File.ReadAt(p, off)
}

func (f *faultFile) Write(p []byte) (int, error) {
	if err := f.fs.maybe(errorfs.OpFileWrite, f.path); err != nil {
		return 0, err
	}
	return f.File.Write(p)
}

func (f *faultFile) WriteAt(p []byte, off int64) (int, error) {
	if err := f.fs.inj.MaybeError(errorfs.Op{Kind: errorfs.OpFileWriteAt, Path: f.path, Offset: off}); err != nil {
		return 0, err
	}
	return f.File.WriteAt(p, off)
}

func (f *faultFile) Preallocate(off, n int64) error {
	if err := f.fs.maybe(errorfs.OpFilePreallocate, f.path); err != nil {
		return err
	}
	return f.File.Preallocate(off, n)
}

// sync runs one sync of the file: it lies once an earlier one failed.
func (f *faultFile) sync(kind errorfs.OpKind, do func() error) error {
	if f.fs.Lost(f.path) {
		return nil
	}
	if err := f.fs.maybe(kind, f.path); err != nil {
		f.fs.setLost(f.path)
		return err
	}
	return do()
}

func (f *faultFile) Sync() error { return f.sync(errorfs.OpFileSync, f.File.Sync) }

func (f *faultFile) SyncData() error { return f.sync(errorfs.OpFileSyncData, f.File.SyncData) }

func (f *faultFile) SyncTo(length int64) (bool, error) {
	var full bool
	err := f.sync(errorfs.OpFileSyncTo, func() error {
		var err error
		full, err = f.File.SyncTo(length)
		return err
	})
	return full, err
}

// CloneGate lets a test cut the power (MemFS.CrashClone) while the store
// runs, never inside a Link, a ReuseForWrite or a Lock (see Holder), and
// of several disks at one instant (CrashCloneAll). Embed it in an
// Injector, or use it as one: it injects nothing, and every operation
// waits while a clone is taken, so that the clones are the disks of one
// moment (operations already past the gate land, or not, as a power cut
// lets them).
type CloneGate struct{ mu sync.RWMutex }

var _ Holder = (*CloneGate)(nil)

// MaybeError injects nothing; it waits while a clone is taken.
func (g *CloneGate) MaybeError(errorfs.Op) error {
	g.mu.RLock()
	g.mu.RUnlock() //nolint:staticcheck // an empty critical section: waiting for the clone is the point
	return nil
}

// Hold keeps CrashClone waiting until the operation ends.
func (g *CloneGate) Hold(errorfs.Op) func() {
	g.mu.RLock()
	return g.mu.RUnlock
}

// CrashClone clones mem (crashable); see CrashCloneAll.
func (g *CloneGate) CrashClone(mem *vfs.MemFS, cfg vfs.CrashCloneCfg) *vfs.MemFS {
	return g.CrashCloneAll(cfg, mem)[0]
}

// CrashCloneAll clones every mem (crashable) at one instant, once no Link,
// ReuseForWrite or Lock through an FS of this gate is running, and holds
// every operation through the gate off while it does.
func (g *CloneGate) CrashCloneAll(cfg vfs.CrashCloneCfg, mems ...*vfs.MemFS) []*vfs.MemFS {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]*vfs.MemFS, len(mems))
	for i, m := range mems {
		out[i] = m.CrashClone(cfg)
	}
	return out
}

func (g *CloneGate) String() string { return "clone gate" }
