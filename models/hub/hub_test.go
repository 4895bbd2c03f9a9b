package hub_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/npuchat/npuchat/models/hub"
	"github.com/npuchat/npuchat/models/hub/hubtest"
)

const repo, rev = "julianmb/MiniCPM5-2B-NPU2", "main"

// content returns n bytes that differ per name, so that a byte in the
// wrong place changes the hash.
func content(name string, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*31+len(name)*7) ^ name[i%len(name)]
	}
	return b
}

func repoFiles() []hubtest.File {
	return []hubtest.File{
		{Path: "config.json", Content: []byte(`{"model_type":"qwen3","flm_version":"0.9.22"}`)},
		{Path: "model.q4nx", Content: content("model.q4nx", 200_000), LFS: true},
		{Path: "tokenizer.json", Content: content("tokenizer.json", 50_000), LFS: true},
		{Path: "tokenizer_config.json", Content: []byte(`{"eos_token":"<|im_end|>"}`)},
		{Path: "sub/dir/attn.xclbin", Content: content("attn", 10_000), LFS: true},
	}
}

func newClient(s *hubtest.Server) *hub.Client {
	return &hub.Client{
		Endpoint: s.URL(),
		Token:    "hf_secret",
		Sleep:    func(ctx context.Context, d time.Duration) error { return ctx.Err() },
	}
}

func treeOf(t *testing.T, c *hub.Client) map[string]hub.File {
	t.Helper()
	files, err := c.Tree(context.Background(), repo, rev)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]hub.File{}
	for _, f := range files {
		m[f.Path] = f
	}
	return m
}

func TestTreePaginationAndHashes(t *testing.T) {
	for _, relative := range []bool{false, true} {
		s := hubtest.New(repo, rev, repoFiles())
		s.RelativeLinks = relative
		s.PageSize = 2
		c := newClient(s)
		got := treeOf(t, c)
		if len(got) != len(repoFiles()) {
			t.Errorf("relative=%v: %d files, want %d: %v", relative, len(got), len(repoFiles()), got)
		}
		for _, f := range repoFiles() {
			g := got[f.Path]
			if g.Size != int64(len(f.Content)) {
				t.Errorf("%s: size %d, want %d", f.Path, g.Size, len(f.Content))
			}
			if f.LFS && g.SHA256 != hubtest.SHA256(f.Content) {
				t.Errorf("%s: sha256 %q", f.Path, g.SHA256)
			}
			if !f.LFS && (g.SHA256 != "" || g.BlobID != hubtest.BlobSHA1(f.Content)) {
				t.Errorf("%s: blob %q sha256 %q", f.Path, g.BlobID, g.SHA256)
			}
		}
		pages := 0
		for _, r := range s.Requests() {
			if strings.Contains(r.Path, "/tree/") {
				pages++
				if r.Auth != "Bearer hf_secret" {
					t.Errorf("tree request without the token: %q", r.Auth)
				}
			}
		}
		if pages != 3 { // 5 files + 1 directory, 2 per page
			t.Errorf("relative=%v: %d tree pages, want 3", relative, pages)
		}
		s.Close()
	}
}

// download fetches every file of the fake repo into dir.
func download(t *testing.T, c *hub.Client, dir string) error {
	t.Helper()
	for _, f := range treeOf(t, c) {
		if err := c.Download(context.Background(), repo, rev, f, dir, nil); err != nil {
			return err
		}
	}
	return nil
}

// assertComplete checks that dir holds exactly the repo's files with the
// right content and no leftovers.
func assertComplete(t *testing.T, dir string) {
	t.Helper()
	for _, f := range repoFiles() {
		b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(f.Path)))
		if err != nil || !bytes.Equal(b, f.Content) {
			t.Errorf("%s: not the repository's content (err %v)", f.Path, err)
		}
	}
	filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err == nil && strings.HasSuffix(p, ".partial") {
			t.Errorf("leftover %s", p)
		}
		return nil
	})
}

func TestDownloadRedirectsAndTokenStaysOnHub(t *testing.T) {
	s := hubtest.New(repo, rev, repoFiles())
	defer s.Close()
	dir := t.TempDir()
	if err := download(t, newClient(s), dir); err != nil {
		t.Fatal(err)
	}
	assertComplete(t, dir)
	cdn := 0
	for _, r := range s.Requests() {
		if strings.HasPrefix(r.Host, "localhost") {
			cdn++
			if r.Auth != "" {
				t.Errorf("CDN %s got Authorization %q", r.Path, r.Auth)
			}
		} else if r.Auth != "Bearer hf_secret" {
			t.Errorf("hub %s without the token", r.Path)
		}
	}
	if cdn != 3 {
		t.Errorf("%d CDN requests, want 3 (the LFS files)", cdn)
	}
	// A second run downloads nothing.
	before := len(s.Requests())
	for _, f := range treeOf(t, newClient(s)) {
		if err := newClient(s).Download(context.Background(), repo, rev, f, dir, nil); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range s.Requests()[before:] {
		if !strings.Contains(r.Path, "/tree/") {
			t.Errorf("second run fetched %s", r.Path)
		}
	}
}

// TestGoDropsAuthorizationOnRedirect pins down what Go's http.Client
// does by itself (it compares host names, not ports) and that
// CheckRedirect also drops the header when only the port differs.
func TestGoDropsAuthorizationOnRedirect(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]string{}
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen[r.Host] = r.Header.Get("Authorization")
		mu.Unlock()
	}))
	defer target.Close()
	other := strings.Replace(target.URL, "127.0.0.1", "localhost", 1)
	for _, tc := range []struct {
		name     string
		to       string
		client   *http.Client
		wantAuth bool
	}{
		{"go default, other host name", other, &http.Client{}, false},
		{"go default, same host name, other port", target.URL, &http.Client{}, true},
		{"hub client, other host name", other, hub.NewHTTPClient(), false},
		{"hub client, same host name, other port", target.URL, hub.NewHTTPClient(), false},
	} {
		src := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, tc.to+"/blob", http.StatusFound)
		}))
		req, _ := http.NewRequest("GET", src.URL+"/x", nil)
		req.Header.Set("Authorization", "Bearer hf_secret")
		resp, err := tc.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		mu.Lock()
		var got string
		for _, v := range seen {
			got = v
		}
		clear(seen)
		mu.Unlock()
		if (got != "") != tc.wantAuth {
			t.Errorf("%s: target got Authorization %q, want sent=%v", tc.name, got, tc.wantAuth)
		}
		src.Close()
	}
}

func TestTLSIsVerified(t *testing.T) {
	s := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "[]") }))
	defer s.Close()
	c := &hub.Client{Endpoint: s.URL, Attempts: 1}
	_, err := c.Tree(context.Background(), repo, rev)
	if err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("self-signed certificate accepted or odd error: %v", err)
	}
}

func TestFaults(t *testing.T) {
	const big = "model.q4nx"
	half := 100_000
	for _, tc := range []struct {
		name   string
		faults []hubtest.Fault
		// wantRanges lists the Range headers of the content requests.
		wantRanges []string
	}{
		{"connection dropped mid-file resumes", []hubtest.Fault{{DropAfter: half}}, []string{"", "bytes=100000-"}},
		{"500 then success", []hubtest.Fault{{Status: 500}, {Status: 503}}, []string{"", "", ""}},
		{"server ignores Range", []hubtest.Fault{{DropAfter: half}, {IgnoreRange: true}}, []string{"", "bytes=100000-"}},
		{"corrupted byte fetched again", []hubtest.Fault{{Corrupt: true}}, []string{"", ""}},
		{"stalled body retried", []hubtest.Fault{{Stall: true}}, []string{"", ""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := hubtest.New(repo, rev, repoFiles())
			defer s.Close()
			s.AddFaults(big, tc.faults...)
			c := newClient(s)
			c.IdleTimeout = 300 * time.Millisecond
			dir := t.TempDir()
			if err := download(t, c, dir); err != nil {
				t.Fatal(err)
			}
			assertComplete(t, dir)
			var ranges []string
			for _, r := range s.Requests() {
				if strings.HasSuffix(r.Path, "/"+big) && strings.HasPrefix(r.Host, "localhost") {
					ranges = append(ranges, r.Range)
				}
			}
			if strings.Join(ranges, "|") != strings.Join(tc.wantRanges, "|") {
				t.Errorf("content requests with Range %q, want %q", ranges, tc.wantRanges)
			}
		})
	}
}

// A download that fails for good leaves the previous good file in place
// and installs nothing.
func TestFailuresKeepPreviousState(t *testing.T) {
	const name = "model.q4nx"
	old := []byte("previous good version")
	enospc := func(s *hubtest.Server, c *hub.Client) {
		c.FS = &fullDisk{limit: 50_000}
	}
	for _, tc := range []struct {
		name    string
		setup   func(s *hubtest.Server, c *hub.Client)
		wantErr func(error) bool
		maxReq  int
	}{
		// A second mismatch is final: no third (or fifth) 2 GB download.
		{"always corrupt", func(s *hubtest.Server, c *hub.Client) {
			s.AddFaults(name, hubtest.Fault{Corrupt: true}, hubtest.Fault{Corrupt: true}, hubtest.Fault{Corrupt: true})
			c.Attempts = 5
		}, func(err error) bool {
			return errors.Is(err, hub.ErrHashMismatch) && strings.Contains(err.Error(), "twice")
		}, 2},
		{"always 500", func(s *hubtest.Server, c *hub.Client) {
			s.AddFaults(name, hubtest.Fault{Status: 500}, hubtest.Fault{Status: 500}, hubtest.Fault{Status: 500})
			c.Attempts = 3
		}, func(err error) bool {
			return strings.Contains(err.Error(), "500") && strings.Contains(err.Error(), "try again in a few minutes")
		}, 3},
		{"always 429", func(s *hubtest.Server, c *hub.Client) {
			s.AddFaults(name, hubtest.Fault{Status: 429}, hubtest.Fault{Status: 429})
			c.Attempts = 2
		}, func(err error) bool { return strings.Contains(err.Error(), "too many downloads") }, 2},
		{"disk full", enospc, func(err error) bool { return errors.Is(err, syscall.ENOSPC) }, 1},
		{"404 not retried", func(s *hubtest.Server, c *hub.Client) {
			s.AddFaults(name, hubtest.Fault{Status: 404})
		}, func(err error) bool { return strings.Contains(err.Error(), "404 Not Found") }, 1},
		{"403 gated", func(s *hubtest.Server, c *hub.Client) {
			s.AddFaults(name, hubtest.Fault{Status: 403})
		}, func(err error) bool { return strings.Contains(err.Error(), "gated") }, 1},
		{"401 token", func(s *hubtest.Server, c *hub.Client) {
			s.AddFaults(name, hubtest.Fault{Status: 401})
		}, func(err error) bool { return strings.Contains(err.Error(), "HF_TOKEN") }, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := hubtest.New(repo, rev, repoFiles())
			defer s.Close()
			c := newClient(s)
			tc.setup(s, c)
			dir := t.TempDir()
			final := filepath.Join(dir, name)
			os.WriteFile(final, old, 0o644)
			err := c.Download(context.Background(), repo, rev, treeOf(t, c)[name], dir, nil)
			if err == nil || !tc.wantErr(err) {
				t.Fatalf("err = %v", err)
			}
			if b, _ := os.ReadFile(final); !bytes.Equal(b, old) {
				t.Errorf("the previous file was changed")
			}
			if n := s.Downloads(name); n != tc.maxReq {
				t.Errorf("%d content requests, want %d", n, tc.maxReq)
			}
			if strings.Contains(tc.name, "corrupt") {
				if _, err := os.Stat(hub.PartialName(final)); err == nil {
					t.Errorf("corrupt bytes kept in the .partial file")
				}
			}
		})
	}
}

// fullDisk fails writes with ENOSPC after limit bytes.
type fullDisk struct {
	mu      sync.Mutex
	limit   int
	written int
}

func (d *fullDisk) OpenFile(name string, flag int, perm os.FileMode) (hub.WritableFile, error) {
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &fullFile{f, d}, nil
}

type fullFile struct {
	*os.File
	d *fullDisk
}

func (f *fullFile) Write(p []byte) (int, error) {
	f.d.mu.Lock()
	defer f.d.mu.Unlock()
	room := f.d.limit - f.d.written
	if room <= 0 {
		return 0, &os.PathError{Op: "write", Path: f.Name(), Err: syscall.ENOSPC}
	}
	if len(p) > room {
		n, _ := f.File.Write(p[:room])
		f.d.written += n
		return n, &os.PathError{Op: "write", Path: f.Name(), Err: syscall.ENOSPC}
	}
	n, err := f.File.Write(p)
	f.d.written += n
	return n, err
}

func TestSlowServerCancelThenResume(t *testing.T) {
	const name = "model.q4nx"
	s := hubtest.New(repo, rev, repoFiles())
	defer s.Close()
	s.AddFaults(name, hubtest.Fault{Delay: 5 * time.Millisecond})
	c := newClient(s)
	dir := t.TempDir()
	f := treeOf(t, c)[name]
	ctx, cancel := context.WithCancel(context.Background())
	var events []hub.Progress
	err := c.Download(ctx, repo, rev, f, dir, func(p hub.Progress) {
		events = append(events, p)
		if p.Bytes >= 20_000 {
			cancel()
		}
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
		t.Fatal("a cancelled download was installed")
	}
	partial := hub.PartialName(filepath.Join(dir, name))
	st, err := os.Stat(partial)
	if err != nil || st.Size() == 0 || st.Size() >= f.Size {
		t.Fatalf("partial after cancel: %v %v", st, err)
	}
	if len(events) == 0 {
		t.Fatal("no progress events")
	}
	// Resume from where it stopped.
	var last hub.Progress
	if err := c.Download(context.Background(), repo, rev, f, dir, func(p hub.Progress) { last = p }); err != nil {
		t.Fatal(err)
	}
	if !last.Done || last.Bytes != f.Size || last.Total != f.Size {
		t.Errorf("last event %+v", last)
	}
	reqs := s.Requests()
	if r := reqs[len(reqs)-1]; r.Range != "bytes="+strconv.FormatInt(st.Size(), 10)+"-" {
		t.Errorf("resume sent Range %q, want from byte %d", r.Range, st.Size())
	}
	b, _ := os.ReadFile(filepath.Join(dir, name))
	if !bytes.Equal(b, content(name, 200_000)) {
		t.Error("resumed file differs")
	}
}

func TestProgressRateAndETA(t *testing.T) {
	s := hubtest.New(repo, rev, repoFiles())
	defer s.Close()
	c := newClient(s)
	// A fake clock that advances 10 ms per reading.
	now := time.Unix(0, 0)
	var mu sync.Mutex
	c.Now = func() time.Time { mu.Lock(); defer mu.Unlock(); now = now.Add(10 * time.Millisecond); return now }
	c.ProgressEvery = time.Nanosecond
	var evs []hub.Progress
	if err := c.Download(context.Background(), repo, rev, treeOf(t, c)["model.q4nx"], t.TempDir(), func(p hub.Progress) { evs = append(evs, p) }); err != nil {
		t.Fatal(err)
	}
	if len(evs) < 3 {
		t.Fatalf("%d events", len(evs))
	}
	mid := evs[len(evs)/2]
	if mid.Rate <= 0 || mid.ETA <= 0 || mid.Total != 200_000 || mid.File != "model.q4nx" || mid.Done {
		t.Errorf("mid event %+v", mid)
	}
	for i := 1; i < len(evs); i++ {
		if evs[i].Bytes < evs[i-1].Bytes {
			t.Errorf("bytes went back: %+v then %+v", evs[i-1], evs[i])
		}
	}
}

func TestHostileNames(t *testing.T) {
	for _, name := range []string{"../evil.json", "a/../../evil", "/etc/passwd", "C:/Windows/evil", `a\..\evil`, "a\x00b", "./x", "a//b", "c:evil", "...", "a/.. ", "x.", "NUL", "sub/com1.txt"} {
		s := hubtest.New(repo, rev, append(repoFiles(), hubtest.File{Path: name, Content: []byte("x")}))
		c := newClient(s)
		if _, err := c.Tree(context.Background(), repo, rev); err == nil || !strings.Contains(err.Error(), "refusing file name") {
			t.Errorf("%q: Tree err = %v", name, err)
		}
		dir := t.TempDir()
		err := c.Download(context.Background(), repo, rev, hub.File{Path: name, Size: 1, BlobID: hubtest.BlobSHA1([]byte("x"))}, filepath.Join(dir, "in"), nil)
		if err == nil || !strings.Contains(err.Error(), "refusing") {
			t.Errorf("%q: Download err = %v", name, err)
		}
		if entries, _ := os.ReadDir(dir); len(entries) != 0 {
			t.Errorf("%q: wrote %v", name, entries)
		}
		s.Close()
	}
	for _, ok := range []string{"config.json", "sub/dir/a.xclbin", "a..b"} {
		if err := hub.SafePath(ok); err != nil {
			t.Errorf("SafePath(%q) = %v", ok, err)
		}
	}
}

func TestTreeErrors(t *testing.T) {
	s := hubtest.New(repo, rev, repoFiles())
	defer s.Close()
	c := newClient(s)
	if _, err := c.Tree(context.Background(), "julianmb/nope", rev); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("missing repo: %v", err)
	}
	s.AddFaults("@tree", hubtest.Fault{Status: 502})
	if _, err := c.Tree(context.Background(), repo, rev); err != nil {
		t.Errorf("a 502 then success: %v", err)
	}
	for _, bad := range []string{"noslash", "a/b/c", "../x", ""} {
		if _, err := c.Tree(context.Background(), bad, rev); err == nil {
			t.Errorf("repo %q accepted", bad)
		}
	}
	c.Endpoint = "ftp://x"
	if _, err := c.Tree(context.Background(), repo, rev); err == nil {
		t.Error("ftp endpoint accepted")
	}
}

func TestCheckSpace(t *testing.T) {
	free := func(n uint64) hub.DiskFree { return func(string) (uint64, error) { return n, nil } }
	if err := hub.CheckSpace(free(10<<30), "/x", 2<<30); err != nil {
		t.Error(err)
	}
	err := hub.CheckSpace(free(1<<30), "/x", 2<<30)
	if err == nil || !strings.Contains(err.Error(), "not enough free space") {
		t.Errorf("err = %v", err)
	}
	if n, err := hub.FreeSpace(t.TempDir()); err != nil || n == 0 {
		t.Errorf("FreeSpace = %d, %v", n, err)
	}
}

func TestVerifyGitBlobHash(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	os.WriteFile(p, []byte("hello\n"), 0o644)
	// `printf 'hello\n' | git hash-object --stdin`
	f := hub.File{Path: "f", Size: 6, BlobID: "ce013625030ba8dba906f756967f9e9ca394464a"}
	if err := hub.Verify(context.Background(), p, f); err != nil {
		t.Error(err)
	}
	f.BlobID = strings.Repeat("0", 40)
	if err := hub.Verify(context.Background(), p, f); !errors.Is(err, hub.ErrHashMismatch) {
		t.Errorf("err = %v", err)
	}
}

// FuzzSafePath: whatever the server sends, an accepted name stays inside
// the folder on both Unix and Windows.
func FuzzSafePath(f *testing.F) {
	for _, s := range []string{"config.json", "a/b", "../x", "C:x", `a\b`, "a\x00", "/x", "a//b", "..", "...", "a/./b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		if hub.SafePath(p) != nil {
			return
		}
		dir := "/base/dir"
		got, err := hub.Join(dir, p)
		if err != nil {
			t.Fatal(err)
		}
		rel, err := filepath.Rel(dir, got)
		if err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, "../") {
			t.Fatalf("%q escapes: %s", p, got)
		}
		if strings.ContainsAny(p, "\\:\x00") {
			t.Fatalf("%q accepted with a Windows-special character", p)
		}
	})
}

func TestHubErrorHeadersShown(t *testing.T) {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Error-Code", "GatedRepo")
		w.Header().Set("X-Error-Message", "Access to model julianmb/x is restricted.")
		w.WriteHeader(http.StatusForbidden)
	}))
	defer s.Close()
	c := &hub.Client{Endpoint: s.URL}
	_, err := c.Tree(context.Background(), repo, rev)
	if err == nil || !strings.Contains(err.Error(), "gated") || !strings.Contains(err.Error(), "hub: GatedRepo Access to model julianmb/x is restricted.") {
		t.Errorf("err = %v", err)
	}
}

// A server that sends more than the listing announced is cut off and
// the file is not installed.
func TestOversizedBodyRefused(t *testing.T) {
	s := hubtest.New(repo, rev, repoFiles())
	defer s.Close()
	c := newClient(s)
	c.Attempts = 2
	f := treeOf(t, c)["config.json"]
	f.Size -= 5 // the listing says less than the server sends
	dir := t.TempDir()
	err := c.Download(context.Background(), repo, rev, f, dir, nil)
	if err == nil || !strings.Contains(err.Error(), "more than") {
		t.Fatalf("err = %v", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("left %v", entries)
	}
}

// A hub that stops answering while listing must not hang the install
// (which holds the install lock): each page is abandoned after
// IdleTimeout without a byte, retried, and finally reported.
func TestTreeStallTimesOut(t *testing.T) {
	for _, tc := range []struct {
		name   string
		faults []hubtest.Fault
		ok     bool
	}{
		{"stall after the first byte, then fine", []hubtest.Fault{{Stall: true}}, true},
		{"no headers, then fine", []hubtest.Fault{{Delay: time.Hour}}, true},
		{"stall on every attempt", []hubtest.Fault{{Stall: true}, {Stall: true}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := hubtest.New(repo, rev, repoFiles())
			defer s.Close()
			c := newClient(s)
			c.HTTP = hub.NewHTTPClient()
			c.IdleTimeout = 300 * time.Millisecond
			c.Attempts = 2
			s.AddFaults("@tree", tc.faults...)
			done := make(chan error, 1)
			go func() { _, err := c.Tree(context.Background(), repo, rev); done <- err }()
			select {
			case err := <-done:
				if tc.ok && err != nil {
					t.Errorf("Tree after one stalled page: %v", err)
				}
				if !tc.ok && (err == nil || !strings.Contains(err.Error(), "no data for 300ms")) {
					t.Errorf("Tree = %v, want a stall error", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("Tree still waiting 10 s after the hub stalled (IdleTimeout 300ms)")
			}
		})
	}
}

// Commit resolves a branch to the commit it points at now; a commit id
// needs no request; a missing revision is a clear error.
func TestCommit(t *testing.T) {
	s := hubtest.New(repo, rev, repoFiles())
	defer s.Close()
	c := newClient(s)
	head := s.Commit(repo, rev)
	for _, tc := range []struct {
		name, revision, want, errHas string
		requests                     int
	}{
		{"branch", rev, head, "", 1},
		{"commit id", head, head, "", 0},
		{"no such branch", "nope", "", "404 Not Found", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(s.Requests())
			got, err := c.Commit(context.Background(), repo, tc.revision)
			if tc.errHas != "" {
				if err == nil || !strings.Contains(err.Error(), tc.errHas) {
					t.Errorf("Commit(%q) = %q, %v; want an error with %q", tc.revision, got, err, tc.errHas)
				}
			} else if err != nil || got != tc.want {
				t.Errorf("Commit(%q) = %q, %v; want %q", tc.revision, got, err, tc.want)
			}
			if n := len(s.Requests()) - before; n != tc.requests {
				t.Errorf("%d requests, want %d", n, tc.requests)
			}
		})
	}
	// A new push moves the branch; the old commit stays listable.
	s.AddRepo(repo, rev, repoFiles()[:2])
	if got, _ := c.Commit(context.Background(), repo, rev); got == head || got != s.Commit(repo, rev) {
		t.Errorf("after a push, Commit = %q (old head %q)", got, head)
	}
	if files, err := c.Tree(context.Background(), repo, head); err != nil || len(files) != len(repoFiles()) {
		t.Errorf("the old commit's tree: %d files, %v", len(files), err)
	}
}
