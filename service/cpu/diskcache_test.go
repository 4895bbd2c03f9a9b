package cpu

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/npuchat/npuchat/engine/testmodel"
	"github.com/npuchat/npuchat/service/backend"
)

// diskChat is a chat long enough for a KV file.
func diskChat() *backend.Request {
	return &backend.Request{Messages: []backend.Message{
		{Role: "system", Content: strings.Repeat("you are a model that knows about cats and dogs and trees ", 5)},
		{Role: "user", Content: "tell me about the cat"}}, MaxTokens: 5}
}

// kvFiles lists a folder's KV files.
func kvFiles(t *testing.T, dir string) []string {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "*.kv"))
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// TestKVDiskCacheSurvivesRestart: the KV a backend held when it unloaded
// is read back by a new backend (a restart) for the same chat, which then
// computes only its last token and answers exactly as without a cache.
func TestKVDiskCacheSurvivesRestart(t *testing.T) {
	path := models(t)["gguf"]
	dir := t.TempDir()
	first := load(t, Options{Path: path, KVDir: dir})
	want, _, res, err := run(t, first, diskChat())
	if err != nil {
		t.Fatal(err)
	}
	if res.CachedTokens != 0 {
		t.Fatalf("the first run took %d tokens from a cache", res.CachedTokens)
	}
	if err := first.Unload(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := len(kvFiles(t, dir)); n != 1 {
		t.Fatalf("%d KV files after unloading, want 1", n)
	}

	again := load(t, Options{Path: path, KVDir: dir})
	got, _, res2, err := run(t, again, diskChat())
	if err != nil {
		t.Fatal(err)
	}
	if got != want || res2.CachedTokens != res.PromptTokens-1 {
		t.Errorf("after a restart: %q with %d of %d prompt tokens from the disk cache; want %q and all but the last",
			got, res2.CachedTokens, res2.PromptTokens, want)
	}
}

// TestKVDiskCacheIgnoresBadFiles: a truncated file, a file with one byte
// changed, and a file of another model are never used: the chat is
// computed again, exactly; the damaged files and an earlier format
// version's are deleted, the other model's is left alone.
func TestKVDiskCacheIgnoresBadFiles(t *testing.T) {
	ms := models(t)
	path := ms["gguf"]
	dir := t.TempDir()
	first := load(t, Options{Path: path, KVDir: dir})
	want, _, _, err := run(t, first, diskChat())
	if err != nil {
		t.Fatal(err)
	}
	first.Unload(t.Context())
	good := kvFiles(t, dir)
	if len(good) != 1 {
		t.Fatalf("%d KV files, want 1", len(good))
	}
	orig, err := os.ReadFile(good[0])
	if err != nil {
		t.Fatal(err)
	}

	// another model's file: the same weights as a Hugging Face folder
	// (another file, so another identity)
	otherDir := t.TempDir()
	other := load(t, Options{Path: ms["hf"], KVDir: otherDir})
	if _, _, _, err := run(t, other, diskChat()); err != nil {
		t.Fatal(err)
	}
	other.Unload(t.Context())
	foreign, err := os.ReadFile(kvFiles(t, otherDir)[0])
	if err != nil {
		t.Fatal(err)
	}

	flipped := append([]byte(nil), orig...)
	flipped[len(flipped)/2] ^= 0x40
	for _, c := range []struct {
		name    string
		data    []byte
		deleted bool
	}{
		{"truncated", orig[:len(orig)*2/3], true},
		{"one byte changed", flipped, true},
		{"another model's", foreign, false},
		{"version 1's", append([]byte("NPUCHATKV1\n"), orig[len("NPUCHATKV3\n"):]...), true},
		{"version 2's", append([]byte("NPUCHATKV2\n"), orig[len("NPUCHATKV3\n"):]...), true},
		{"not a KV file", []byte("hello"), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, f := range kvFiles(t, dir) {
				os.Remove(f)
			}
			if err := os.WriteFile(good[0], c.data, 0o600); err != nil {
				t.Fatal(err)
			}
			b := load(t, Options{Path: path, KVDir: dir})
			got, _, res, err := run(t, b, diskChat())
			if err != nil {
				t.Fatal(err)
			}
			if got != want || res.CachedTokens != 0 {
				t.Errorf("with a %s file: %q, %d tokens from a cache; want %q computed", c.name, got, res.CachedTokens, want)
			}
			_, err = os.Stat(good[0])
			if gone := os.IsNotExist(err); gone != c.deleted {
				t.Errorf("the %s file deleted: %v, want %v", c.name, gone, c.deleted)
			}
			b.Unload(t.Context())
		})
	}
}

// TestKVDiskCacheForgetsADeletedChat: a chat's keys and values, in
// memory and in its KV files, go with the chat; another chat's stay; and
// the files go without a loaded model too (ForgetKVFiles).
func TestKVDiskCacheForgetsADeletedChat(t *testing.T) {
	path := models(t)["gguf"]
	dir := t.TempDir()
	b := load(t, Options{Path: path, KVDir: dir})
	chat1, chat2 := diskChat(), diskChat()
	chat1.CacheTag, chat2.CacheTag = "chat-1", "chat-2"
	chat2.Messages[1].Content = "and now tell me everything about the dog and the tree"
	for _, r := range []*backend.Request{chat1, chat2} {
		if _, _, _, err := run(t, b, r); err != nil {
			t.Fatal(err)
		}
	}
	b.Unload(t.Context())
	if n := len(kvFiles(t, dir)); n != 2 {
		t.Fatalf("%d KV files, want one per chat", n)
	}
	b = load(t, Options{Path: path, KVDir: dir})
	if _, _, _, err := run(t, b, chat1); err != nil { // chat 1 in memory again
		t.Fatal(err)
	}
	b.ForgetCache("chat-1")
	if files := kvFiles(t, dir); len(files) != 1 || !strings.Contains(filepath.Base(files[0]), "chat-2-") {
		t.Errorf("after forgetting chat 1: files %v, want chat 2's", files)
	}
	// only the system prompt it shares with chat 2 is still there
	if _, _, res, _ := run(t, b, chat1); res.CachedTokens >= res.PromptTokens-5 {
		t.Errorf("chat 1 after it was forgotten: %d of %d prompt tokens from a cache", res.CachedTokens, res.PromptTokens)
	}
	b.Unload(t.Context())
	if err := ForgetKVFiles(dir, "chat-2"); err != nil {
		t.Fatal(err)
	}
	for _, f := range kvFiles(t, dir) {
		if strings.Contains(filepath.Base(f), "chat-2-") {
			t.Errorf("chat 2's file %s is still there", f)
		}
	}
}

// TestKVDiskCacheEditedChat: after a restart, a chat whose last message
// was edited shares only its beginning with its KV file: that part comes
// from the file (only it is kept in memory), the rest is computed, and
// the answer is the one computed without any cache.
func TestKVDiskCacheEditedChat(t *testing.T) {
	path := models(t)["gguf"]
	dir := t.TempDir()
	first := load(t, Options{Path: path, KVDir: dir})
	if _, _, _, err := run(t, first, diskChat()); err != nil {
		t.Fatal(err)
	}
	first.Unload(t.Context())

	edited := diskChat()
	edited.Messages[1].Content = "no, tell me about the dog instead"
	fresh := load(t, Options{Path: path})
	want, _, wantRes, err := run(t, fresh, edited)
	if err != nil {
		t.Fatal(err)
	}
	again := load(t, Options{Path: path, KVDir: dir})
	got, _, res, err := run(t, again, edited)
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Errorf("the edited chat from its KV file answers %q, computed %q", got, want)
	}
	if res.CachedTokens < 40 || res.CachedTokens >= wantRes.PromptTokens-5 {
		t.Errorf("%d of %d prompt tokens from the disk cache, want the system prompt's (what the edit left)", res.CachedTokens, res.PromptTokens)
	}
	// in memory: the shared part, then the edited chat computed on from it
	if st := again.kv.Stats(); st.Sequences != 1 || st.Tokens > res.PromptTokens+edited.MaxTokens {
		t.Errorf("the cache holds %+v, want the edited chat alone", st)
	}
}

// TestKVDiskCacheKeepsToItsKVType: a KV file written with one KV cache
// type (q8_0) is never read by a backend keeping another (f32, f16),
// which computes the chat itself and leaves the file for its own type;
// a q8_0 backend reads it back after them. The model has 32-dimension
// heads, so that q8_0 is not kept as f16.
func TestKVDiskCacheKeepsToItsKVType(t *testing.T) {
	shape := testmodel.MiniCPM5Small()
	shape.Heads, shape.HeadDim = 8, 32
	w, err := testmodel.Random(7, shape)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "m.gguf")
	if err := testmodel.WriteGGUF(path, w, testmodel.F32); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	written := func(typ string) (string, int) {
		t.Helper()
		b := load(t, Options{Path: path, KVDir: dir, KVCacheType: typ})
		if got := b.CacheStats().KVType; got != typ {
			t.Fatalf("asked for %s: the backend keeps %q", typ, got)
		}
		text, _, res, err := run(t, b, diskChat())
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Unload(t.Context()); err != nil {
			t.Fatal(err)
		}
		return text, res.CachedTokens
	}
	q8, cached := written("q8_0")
	if cached != 0 || len(kvFiles(t, dir)) != 1 {
		t.Fatalf("the first q8_0 run: %d tokens from a cache, %d files", cached, len(kvFiles(t, dir)))
	}
	for _, typ := range []string{"f32", "f16"} {
		if _, cached := written(typ); cached != 0 {
			t.Errorf("a %s backend took %d tokens from a q8_0 file", typ, cached)
		}
	}
	again, cached := written("q8_0")
	if cached == 0 || again != q8 {
		t.Errorf("q8_0 after the others: %q with %d tokens from its file, want %q from the file", again, cached, q8)
	}
}

// TestForgetCacheDuringAnAnswer: a chat deleted while its answer is
// still running (ForgetCache called from inside the answer's stream) does
// not come back when the answer ends: nothing of its tag is kept in
// memory, and nothing of it is written to disk when the backend unloads.
// Another chat's KV stays.
func TestForgetCacheDuringAnAnswer(t *testing.T) {
	path := models(t)["gguf"]
	dir := t.TempDir()
	b := load(t, Options{Path: path, KVDir: dir})
	other := diskChat()
	other.CacheTag = "chat-2"
	other.Messages[1].Content = "and now tell me everything about the dog and the tree"
	if _, _, _, err := run(t, b, other); err != nil {
		t.Fatal(err)
	}
	before := b.CacheStats()

	chat := diskChat()
	chat.CacheTag = "chat-1"
	chat.Messages[0].Content = "a different system prompt, shared with nothing: " + chat.Messages[0].Content
	a := generate(t.Context(), b, chat, func(n int) {
		if n == 2 { // mid-answer: the chat is deleted
			b.ForgetCache("chat-1")
		}
	})
	if a.err != nil {
		t.Fatal(a.err)
	}
	if st := b.CacheStats(); st.Sequences != before.Sequences || st.Tokens != before.Tokens {
		t.Errorf("after the deleted chat's answer ended: %d sequences, %d tokens kept; want chat 2's %d, %d",
			st.Sequences, st.Tokens, before.Sequences, before.Tokens)
	}
	if err := b.Unload(t.Context()); err != nil {
		t.Fatal(err)
	}
	files := kvFiles(t, dir)
	for _, f := range files {
		if strings.Contains(filepath.Base(f), "chat-1-") {
			t.Errorf("the deleted chat's KV was written to disk: %s", f)
		}
	}
	if len(files) != 1 {
		t.Errorf("KV files %v, want chat 2's", files)
	}
}

// TestWarmCacheOnOpen: after a restart, a chat opened in the page
// (WarmCache) has its KV file read into memory before its next message:
// the message then reads nothing from disk, takes all but its last token
// from the cache and answers as without it. A chat in memory already,
// or forgotten, is not read again.
func TestWarmCacheOnOpen(t *testing.T) {
	path := models(t)["gguf"]
	dir := t.TempDir()
	first := load(t, Options{Path: path, KVDir: dir})
	chat := diskChat()
	chat.CacheTag = "chat-1"
	want, _, _, err := run(t, first, chat)
	if err != nil {
		t.Fatal(err)
	}
	first.Unload(t.Context())

	b := load(t, Options{Path: path, KVDir: dir})
	b.WarmCache("chat-1")
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(time.Minute) // a bound on a failure, not a measure
	for b.CacheStats().Sequences == 0 {
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatal("the opened chat's KV file was not read into memory within a minute")
		}
	}
	if b.warm("chat-1") {
		t.Error("a chat in memory already was read again")
	}
	for _, f := range kvFiles(t, dir) { // the message must not need the file
		if err := os.Remove(f); err != nil {
			t.Fatal(err)
		}
	}
	got, _, res, err := run(t, b, chat)
	if err != nil {
		t.Fatal(err)
	}
	if got != want || res.CachedTokens != res.PromptTokens-1 {
		t.Errorf("after warming: %q with %d of %d prompt tokens from the cache; want %q and all but the last", got, res.CachedTokens, res.PromptTokens, want)
	}
	b.Unload(t.Context())

	// forgotten (the chat deleted) before it is warmed: not read
	c := load(t, Options{Path: path, KVDir: dir})
	c.ForgetCache("chat-1")
	if c.warm("chat-1") || c.CacheStats().Sequences != 0 {
		t.Error("a forgotten chat was warmed")
	}
}

// TestKVDiskCacheFileChangedUnderAnAnswer: a chat's KV file read into
// memory when the chat is opened (after a restart), then overwritten in
// place by another process before the chat's next message, changes
// nothing: the message, computed on from what was read, answers exactly
// as a backend without a disk cache does.
func TestKVDiskCacheFileChangedUnderAnAnswer(t *testing.T) {
	path := models(t)["gguf"]
	dir := t.TempDir()
	chat := diskChat()
	chat.CacheTag = "chat-1"
	chat.MaxTokens = 24
	first := load(t, Options{Path: path, KVDir: dir})
	if _, _, _, err := run(t, first, chat); err != nil {
		t.Fatal(err)
	}
	first.Unload(t.Context())
	files := kvFiles(t, dir)
	if len(files) != 1 {
		t.Fatalf("%d KV files, want 1", len(files))
	}
	want, _, _, err := run(t, load(t, Options{Path: path}), chat)
	if err != nil {
		t.Fatal(err)
	}

	b := load(t, Options{Path: path, KVDir: dir})
	if !b.warm("chat-1") {
		t.Fatal("the chat's KV file was not read when the chat was opened")
	}
	f, err := os.OpenFile(files[0], os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	// all but the head: values far out of range (0x7b7b7b7b is 1.3e36 as
	// a float32)
	if _, err := f.WriteAt(bytes.Repeat([]byte{0x7b}, int(fi.Size()-4096)), 4096); err != nil {
		t.Fatal(err)
	}
	f.Close()
	got, _, res, err := run(t, b, chat)
	if err != nil {
		t.Fatal(err)
	}
	if got != want || res.CachedTokens != res.PromptTokens-1 {
		t.Errorf("after the KV file was overwritten: %q, %d of %d prompt tokens from the cache; want %q, all but the last from memory",
			got, res.CachedTokens, res.PromptTokens, want)
	}
}
