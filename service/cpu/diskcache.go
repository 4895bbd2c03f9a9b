package cpu

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/npuchat/npuchat/engine"
)

// DefaultKVDiskLimit bounds the KV files of a disk cache when
// Options.KVDiskLimit is 0.
const DefaultKVDiskLimit = 4 << 30

// minDiskTokens is the shortest sequence worth a KV file: computing a
// shorter prompt again takes about as long as reading it back.
const minDiskTokens = 64

// diskWorth is how many positions more than the memory cache holds a KV
// file must offer to be read.
const diskWorth = 16

// readRoom is the positions past a prompt that a sequence read back
// leaves for the answer (as a session's first allocation does).
const readRoom = 256

// diskCache keeps the keys and values of kept sequences in files of a
// folder beside the history (engine.Model.WriteKV's format), written when
// the KV cache drops a sequence and when the backend unloads, and read
// back when a prompt shares more with a file than with anything in
// memory (after a restart: reopening an old chat). Files are named by a
// hash of the model's identity, the scope and the tokens; each holds its
// identity, scope and tokens, checked before use, and a checksum of all
// of it, so a damaged, cut short or foreign file is ignored, never
// trusted. The folder's KV files are kept within a total size, the
// least recently written going first.
type diskCache struct {
	dir      string
	limit    int64
	identity string
	m        *engine.Model
	log      *slog.Logger
	// maxCtx is the session's context (0: unknown): a sequence read
	// back gets room up to it for the prompt's rest and its answer.
	maxCtx int

	mu    sync.Mutex  // guards index
	index []diskEntry // this model's readable files
	wg    sync.WaitGroup
}

// diskEntry is one KV file of this model.
type diskEntry struct {
	path   string
	scope  string
	tag    string
	tokens []int
}

// openDiskCache indexes the folder's KV files of this model (reading
// their headers only).
func openDiskCache(dir string, limit int64, m *engine.Model, identity string, log *slog.Logger) (*diskCache, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("KV disk cache: %w", err)
	}
	if limit <= 0 {
		limit = DefaultKVDiskLimit
	}
	d := &diskCache{dir: dir, limit: limit, identity: identity, m: m, log: log}
	names, _ := filepath.Glob(filepath.Join(dir, "*.kv"))
	for _, p := range names {
		f, err := engine.OpenKVFile(p)
		if err != nil {
			// a FIFO or a folder named like a KV file: not one, never
			// waited for
			log.Warn("KV disk cache: ignoring a file", "path", p, "err", err)
			continue
		}
		h, tokens, err := m.ReadKVHeader(f, identity)
		f.Close()
		if err != nil {
			if engine.IsOldKVFile(p) {
				os.Remove(p) // an earlier version's: no version reads it again
			}
			continue // another model's, or not one: not ours to use
		}
		d.index = append(d.index, diskEntry{path: p, scope: h.Scope, tag: h.Tag, tokens: tokens})
	}
	return d, nil
}

// name is a sequence's file name: its tag (when it is a plain name, as
// "chat-12"), so that ForgetKVFiles finds a chat's files without the
// model, and a hash of the identity, the scope and the tokens.
func (d *diskCache) name(scope, tag string, tokens []int) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00", d.identity, scope)
	b := make([]byte, 4)
	for _, t := range tokens {
		binary.LittleEndian.PutUint32(b, uint32(t))
		h.Write(b)
	}
	name := hex.EncodeToString(h.Sum(nil)[:16]) + ".kv"
	if plainTag(tag) {
		name = tag + "-" + name
	}
	return filepath.Join(d.dir, name)
}

// plainTag reports whether a tag can start a file name: letters, digits,
// '-' and '_', at most 64.
func plainTag(tag string) bool {
	if tag == "" || len(tag) > 64 {
		return false
	}
	for _, r := range tag {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return false
		}
	}
	return true
}

// ForgetKVFiles deletes the KV files of a tag (a deleted chat's) in a
// disk cache folder, of any model, without loading one.
func ForgetKVFiles(dir, tag string) error {
	if !plainTag(tag) {
		return fmt.Errorf("KV files of %q: not a plain tag", tag)
	}
	names, err := filepath.Glob(filepath.Join(dir, tag+"-*.kv"))
	if err != nil {
		return err
	}
	var errs []error
	for _, p := range names {
		if err := os.Remove(p); err != nil && !os.IsNotExist(err) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// forgetTag deletes this model's files of a tag.
func (d *diskCache) forgetTag(tag string) {
	d.wait() // a write of the chat's may be under way
	d.mu.Lock()
	keep := d.index[:0]
	for _, e := range d.index {
		if e.tag == tag {
			os.Remove(e.path)
			continue
		}
		keep = append(keep, e)
	}
	d.index = keep
	d.mu.Unlock()
	ForgetKVFiles(d.dir, tag)
}

// quitWrite bounds what Unload writes: a few recent chats, not a whole
// budget of gigabytes when the program quits.
const quitWrite = 1 << 30

// has reports whether st's file is there already (read back, or written
// when it was dropped before).
func (d *diskCache) has(st *engine.StoredKV) bool {
	_, err := os.Stat(d.name(st.Scope, st.Tag, st.Tokens))
	return err == nil
}

// saveLater writes st in the background (the KV cache's Evicted hook:
// the sequence left the cache, its slabs stay valid).
func (d *diskCache) saveLater(st *engine.StoredKV) {
	if len(st.Tokens) < minDiskTokens {
		return
	}
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		d.save(st)
	}()
}

// save writes st as a KV file (through a temporary file, renamed), drops
// this model's files it makes redundant (prefixes of it in its scope),
// and keeps the folder within its limit.
func (d *diskCache) save(st *engine.StoredKV) {
	if len(st.Tokens) < minDiskTokens {
		return
	}
	path := d.name(st.Scope, st.Tag, st.Tokens)
	if err := d.write(path, st); err != nil {
		d.log.Warn("KV disk cache: write", "path", path, "err", err)
		return
	}
	d.mu.Lock()
	keep := d.index[:0]
	for _, e := range d.index {
		if e.path == path {
			continue
		}
		if e.scope == st.Scope && len(e.tokens) <= len(st.Tokens) && prefixOf(e.tokens, st.Tokens) {
			os.Remove(e.path)
			continue
		}
		keep = append(keep, e)
	}
	d.index = append(keep, diskEntry{path: path, scope: st.Scope, tag: st.Tag, tokens: st.Tokens})
	d.mu.Unlock()
	d.trim()
}

func (d *diskCache) write(path string, st *engine.StoredKV) error {
	f, err := os.CreateTemp(d.dir, ".kv-*")
	if err != nil {
		return err
	}
	err = d.m.WriteKV(f, st, d.identity)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
	}
	return err
}

// trim deletes the least recently written KV files of the folder (any
// model's) until they fit the limit.
func (d *diskCache) trim() {
	names, _ := filepath.Glob(filepath.Join(d.dir, "*.kv"))
	type file struct {
		path string
		size int64
		mod  time.Time
	}
	var files []file
	var total int64
	for _, p := range names {
		if fi, err := os.Stat(p); err == nil {
			files = append(files, file{p, fi.Size(), fi.ModTime()})
			total += fi.Size()
		}
	}
	sort.Slice(files, func(i, j int) bool { return files[i].mod.Before(files[j].mod) })
	for i := 0; total > d.limit && i < len(files); i++ {
		if os.Remove(files[i].path) == nil {
			total -= files[i].size
			d.forget(files[i].path)
		}
	}
}

// forget drops a file from the index.
func (d *diskCache) forget(path string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for i, e := range d.index {
		if e.path == path {
			d.index = append(d.index[:i], d.index[i+1:]...)
			return
		}
	}
}

// lookup reads the KV file that shares the longest prefix with prompt in
// scope, when it shares more than inMemory positions by diskWorth; nil
// when none does or the file cannot be trusted (it is then deleted).
func (d *diskCache) lookup(scope string, prompt []int, inMemory int) *engine.StoredKV {
	d.mu.Lock()
	best, bestN := "", inMemory+diskWorth-1
	for _, e := range d.index {
		if e.scope != scope {
			continue
		}
		if n := min(commonLen(e.tokens, prompt), len(prompt)-1); n > bestN {
			best, bestN = e.path, n
		}
	}
	d.mu.Unlock()
	if best == "" {
		return nil
	}
	f, err := engine.OpenKVFile(best)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) { // gone (deleted with its chat) is not news
			d.log.Warn("KV disk cache: ignoring a file", "path", best, "err", err)
		}
		d.forget(best)
		return nil
	}
	// only the positions the prompt shares, with room for the rest of the
	// prompt and an answer, so that the session takes the sequence over
	// without copying it to grow
	room := len(prompt) + readRoom
	if d.maxCtx > 0 {
		room = min(room, d.maxCtx)
	}
	st, _, err := d.m.ReadKVFile(f, d.identity, engine.ReadKVOptions{Keep: bestN, Capacity: room})
	f.Close()
	if err != nil || st.Scope != scope {
		d.log.Warn("KV disk cache: ignoring a file", "path", best, "err", err)
		os.Remove(best)
		d.forget(best)
		return nil
	}
	now := time.Now()
	os.Chtimes(best, now, now) // recently used: trimmed last
	return st
}

// warm reads the longest KV file of a tag (a chat just opened) into kv,
// unless kv holds all but diskWorth of its positions already; insert
// puts it there (the backend's, under its forget lock). It reports
// whether it read a file.
func (d *diskCache) warm(tag string, kv *engine.KVCache, insert func(*engine.StoredKV)) bool {
	if tag == "" {
		return false
	}
	d.mu.Lock()
	var best *diskEntry
	for i := range d.index {
		if e := &d.index[i]; e.tag == tag && (best == nil || len(e.tokens) >= len(best.tokens)) {
			best = e
		}
	}
	var e diskEntry
	if best != nil {
		e = *best
	}
	d.mu.Unlock()
	if best == nil || kv.Match(e.scope, e.tokens)+diskWorth > len(e.tokens) {
		return false
	}
	f, err := engine.OpenKVFile(e.path)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) { // gone (deleted with its chat) is not news
			d.log.Warn("KV disk cache: ignoring a file", "path", e.path, "err", err)
		}
		d.forget(e.path)
		return false
	}
	// at most what a prompt can resume from (all but its last token),
	// with room for the next message and its answer
	keep, room := len(e.tokens), len(e.tokens)+readRoom
	if d.maxCtx > 0 {
		keep, room = min(keep, d.maxCtx-1), min(room, d.maxCtx)
	}
	st, _, err := d.m.ReadKVFile(f, d.identity, engine.ReadKVOptions{Keep: keep, Capacity: room})
	f.Close()
	if err != nil || st.Scope != e.scope {
		d.log.Warn("KV disk cache: ignoring a file", "path", e.path, "err", err)
		os.Remove(e.path)
		d.forget(e.path)
		return false
	}
	now := time.Now()
	os.Chtimes(e.path, now, now)
	insert(st)
	return true
}

// stats are the files and bytes of this model's KV files.
func (d *diskCache) stats() (files int, bytes int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, e := range d.index {
		if fi, err := os.Stat(e.path); err == nil {
			files++
			bytes += fi.Size()
		}
	}
	return files, bytes
}

// wait waits for the writes in the background.
func (d *diskCache) wait() { d.wg.Wait() }

func prefixOf(a, b []int) bool { return commonLen(a, b) == len(a) }

func commonLen(a, b []int) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

// modelIdentity names a model's files for the KV disk cache: the path
// and the size and modification time of every file of it (a folder's
// top-level files), and the options that change what it computes.
func modelIdentity(path string, opts Options, m *engine.Model) string {
	var b strings.Builder
	abs, err := filepath.Abs(path)
	if err != nil {
		abs = path
	}
	fmt.Fprintf(&b, "%s", abs)
	add := func(p string) {
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			fmt.Fprintf(&b, "|%s:%d:%d", filepath.Base(p), fi.Size(), fi.ModTime().UnixNano())
		}
	}
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		entries, _ := os.ReadDir(path)
		for _, e := range entries {
			add(filepath.Join(path, e.Name()))
		}
	} else {
		add(path)
	}
	fmt.Fprintf(&b, "|skipqk=%v rope=%s fold=%v quant=%s|%s", opts.SkipQKNorm, opts.RopeLayout, !opts.NoFoldKV, opts.Quantize, m.KVIdentity())
	sum := sha256.Sum256([]byte(b.String()))
	return hex.EncodeToString(sum[:])
}
