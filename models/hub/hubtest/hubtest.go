// Package hubtest is a fake Hugging Face hub for tests: an httptest
// server that answers the tree API (paginated with Link headers) and
// resolve URLs, redirecting LFS files to a second httptest server (the
// "CDN", on another host name) that honours Range. Faults can be
// injected per request: a dropped connection, a 500, an ignored Range, a
// corrupted byte, a slow or stalled body.
package hubtest

import (
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// File is one file of the fake repository.
type File struct {
	Path    string
	Content []byte
	LFS     bool // served through the CDN redirect, with an LFS sha256
}

// Fault changes how one download request is answered. Faults queued
// for the path "@tree" apply to tree pages: Status, Delay (before the
// headers) and Stall (after the first byte).
type Fault struct {
	Status      int           // answer with this status and no body
	DropAfter   int           // send this many bytes, then cut the connection
	IgnoreRange bool          // answer 200 with the whole file
	Corrupt     bool          // flip one byte of the body
	Delay       time.Duration // wait this long before each 1 KiB chunk
	Stall       bool          // send nothing after the headers until the client leaves
}

// Server is the fake hub and its CDN.
type Server struct {
	Hub, CDN *httptest.Server
	// PageSize is the tree page length (default 2).
	PageSize int
	// RelativeLinks makes Link headers relative URLs.
	RelativeLinks bool

	closed  chan struct{} // closed by Close: stalled handlers return
	mu      sync.Mutex
	repos   map[string][]File // "owner/name@rev", rev a branch or a commit id
	heads   map[string]string // "owner/name@branch" -> commit id
	commits int
	// AfterTree, when set, is called after each tree page is served
	// (to change the repository between the listing and the downloads);
	// set it with SetAfterTree.
	AfterTree func()
	faults    map[string][]Fault
	requests  []Request
}

// Request is a request the fake saw.
type Request struct {
	Host, Path, Range, Auth string
}

// New starts a fake hub serving repo at revision with files. Close it
// with Close.
func New(repo, revision string, files []File) *Server {
	s := &Server{repos: map[string][]File{}, heads: map[string]string{}, faults: map[string][]Fault{}, PageSize: 2, closed: make(chan struct{})}
	s.AddRepo(repo, revision, files)
	s.CDN = httptest.NewServer(http.HandlerFunc(s.serveCDN))
	s.Hub = httptest.NewServer(http.HandlerFunc(s.serveHub))
	return s
}

// AddRepo adds or replaces a repository at a branch: a new commit, which
// the branch then points at (GET /api/models/{repo}/revision/{branch}
// gives its id). The earlier commits stay available by id.
func (s *Server) AddRepo(repo, revision string, files []File) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.commits++
	h := sha1.New()
	fmt.Fprintf(h, "%s@%s #%d\n", repo, revision, s.commits)
	for _, f := range files {
		fmt.Fprintf(h, "%s %s\n", f.Path, SHA256(f.Content))
	}
	commit := hex.EncodeToString(h.Sum(nil))
	s.repos[repo+"@"+revision] = files
	s.repos[repo+"@"+commit] = files
	s.heads[repo+"@"+revision] = commit
}

// SetAfterTree sets AfterTree.
func (s *Server) SetAfterTree(f func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.AfterTree = f
}

// Commit is the commit id a branch points at ("" when unknown).
func (s *Server) Commit(repo, revision string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.heads[repo+"@"+revision]
}

// Close stops both servers, ending stalled answers first.
func (s *Server) Close() {
	s.mu.Lock()
	select {
	case <-s.closed:
	default:
		close(s.closed)
	}
	s.mu.Unlock()
	s.Hub.Close()
	s.CDN.Close()
}

// URL is the hub endpoint (HF_ENDPOINT).
func (s *Server) URL() string { return s.Hub.URL }

// cdnURL names the CDN by "localhost" while the hub is "127.0.0.1", so
// the redirect goes to another host name.
func (s *Server) cdnURL() string { return strings.Replace(s.CDN.URL, "127.0.0.1", "localhost", 1) }

// AddFaults queues faults for the next download requests of path, one
// per request, in order.
func (s *Server) AddFaults(path string, f ...Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults[path] = append(s.faults[path], f...)
}

// Requests returns the requests seen so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// Downloads counts the content requests (CDN or direct) for path.
func (s *Server) Downloads(path string) int {
	n := 0
	for _, r := range s.Requests() {
		if strings.HasSuffix(r.Path, "/"+path) && !strings.Contains(r.Path, "/api/") {
			if strings.Contains(r.Path, "/resolve/") && s.isLFS(path) {
				continue // the redirect, not the content
			}
			n++
		}
	}
	return n
}

func (s *Server) isLFS(path string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, files := range s.repos {
		for _, f := range files {
			if f.Path == path {
				return f.LFS
			}
		}
	}
	return false
}

func (s *Server) record(r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = append(s.requests, Request{Host: r.Host, Path: r.URL.Path, Range: r.Header.Get("Range"), Auth: r.Header.Get("Authorization")})
}

func (s *Server) nextFault(path string) Fault {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.faults[path]
	if len(q) == 0 {
		return Fault{}
	}
	s.faults[path] = q[1:]
	return q[0]
}

// SHA256 and BlobSHA1 are the hashes the hub records.
func SHA256(b []byte) string { h := sha256.Sum256(b); return hex.EncodeToString(h[:]) }

// BlobSHA1 is git's blob hash: sha1("blob <size>\0" + content).
func BlobSHA1(b []byte) string {
	h := sha1.New()
	fmt.Fprintf(h, "blob %d\x00", len(b))
	h.Write(b)
	return hex.EncodeToString(h.Sum(nil))
}

func (s *Server) serveHub(w http.ResponseWriter, r *http.Request) {
	s.record(r)
	if strings.HasPrefix(r.URL.Path, "/api/models/") {
		if parts := strings.SplitN(strings.TrimPrefix(r.URL.Path, "/api/models/"), "/", 4); len(parts) == 4 && parts[2] == "revision" {
			s.serveRevision(w, r, parts[0]+"/"+parts[1], parts[3])
			return
		}
		s.serveTree(w, r)
		s.mu.Lock()
		after := s.AfterTree
		s.mu.Unlock()
		if after != nil {
			after()
		}
		return
	}
	// /{owner}/{name}/resolve/{rev}/{path}
	parts := strings.SplitN(strings.TrimPrefix(r.URL.Path, "/"), "/", 5)
	if len(parts) < 5 || parts[2] != "resolve" {
		http.NotFound(w, r)
		return
	}
	f, ok := s.file(parts[0]+"/"+parts[1], parts[3], parts[4])
	if !ok {
		http.Error(w, "Entry not found", http.StatusNotFound)
		return
	}
	if f.LFS {
		w.Header().Set("X-Linked-Size", strconv.Itoa(len(f.Content)))
		w.Header().Set("X-Linked-Etag", `"`+SHA256(f.Content)+`"`)
		http.Redirect(w, r, s.cdnURL()+"/lfs/"+SHA256(f.Content)+"/"+f.Path, http.StatusFound)
		return
	}
	s.serveContent(w, r, f)
}

func (s *Server) file(repo, rev, path string) (File, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, f := range s.repos[repo+"@"+rev] {
		if f.Path == path {
			return f, true
		}
	}
	return File{}, false
}

func (s *Server) serveCDN(w http.ResponseWriter, r *http.Request) {
	s.record(r)
	parts := strings.SplitN(strings.TrimPrefix(r.URL.Path, "/"), "/", 3)
	if len(parts) < 3 || parts[0] != "lfs" {
		http.NotFound(w, r)
		return
	}
	s.mu.Lock()
	var found *File
	for _, files := range s.repos {
		for i := range files {
			if files[i].Path == parts[2] && SHA256(files[i].Content) == parts[1] {
				found = &files[i]
			}
		}
	}
	s.mu.Unlock()
	if found == nil {
		http.NotFound(w, r)
		return
	}
	s.serveContent(w, r, *found)
}

// serveContent serves a file's bytes with Range support and the next
// queued fault.
func (s *Server) serveContent(w http.ResponseWriter, r *http.Request, f File) {
	fault := s.nextFault(f.Path)
	if fault.Status != 0 {
		http.Error(w, http.StatusText(fault.Status), fault.Status)
		return
	}
	body := f.Content
	if fault.Corrupt {
		body = append([]byte(nil), body...)
		body[len(body)/2] ^= 0x55
	}
	start := int64(0)
	if rg := r.Header.Get("Range"); rg != "" && !fault.IgnoreRange {
		n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimPrefix(rg, "bytes="), "-"), 10, 64)
		if err != nil || n > int64(len(body)) {
			w.Header().Set("Content-Range", fmt.Sprintf("bytes */%d", len(body)))
			w.WriteHeader(http.StatusRequestedRangeNotSatisfiable)
			return
		}
		if n < int64(len(body)) {
			start = n
			w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", n, len(body)-1, len(body)))
		}
	}
	rest := body[start:]
	w.Header().Set("Content-Length", strconv.Itoa(len(rest)))
	w.Header().Set("Accept-Ranges", "bytes")
	if start > 0 {
		w.WriteHeader(http.StatusPartialContent)
	} else {
		w.WriteHeader(http.StatusOK)
	}
	if fault.Stall {
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-s.closed:
		}
		return
	}
	if fault.DropAfter > 0 && fault.DropAfter < len(rest) {
		w.Write(rest[:fault.DropAfter])
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler) // cut the connection mid-body
	}
	for len(rest) > 0 {
		n := min(1024, len(rest))
		if fault.Delay > 0 {
			select {
			case <-time.After(fault.Delay):
			case <-r.Context().Done():
				return
			}
		}
		if _, err := w.Write(rest[:n]); err != nil {
			return
		}
		w.(http.Flusher).Flush()
		rest = rest[n:]
	}
}

// serveRevision answers /api/models/{owner}/{name}/revision/{rev} with
// the model's info, whose "sha" is the commit rev points at.
func (s *Server) serveRevision(w http.ResponseWriter, r *http.Request, repo, rev string) {
	if f := s.nextFault("@revision"); f.Status != 0 {
		http.Error(w, "fault", f.Status)
		return
	}
	s.mu.Lock()
	sha, ok := s.heads[repo+"@"+rev]
	if _, isCommit := s.repos[repo+"@"+rev]; !ok && isCommit {
		sha, ok = rev, true
	}
	s.mu.Unlock()
	if !ok {
		w.Header().Set("X-Error-Code", "RevisionNotFound")
		http.Error(w, `{"error":"Invalid rev id"}`, http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"id": repo, "sha": sha, "private": false})
}

type treeEntry struct {
	Type string          `json:"type"`
	OID  string          `json:"oid"`
	Size int             `json:"size"`
	Path string          `json:"path"`
	LFS  *map[string]any `json:"lfs,omitempty"`
}

// serveTree answers /api/models/{owner}/{name}/tree/{rev}?recursive=true
// with pages of PageSize entries, linked by "Link: <...>; rel=\"next\"".
func (s *Server) serveTree(w http.ResponseWriter, r *http.Request) {
	rest := strings.TrimPrefix(r.URL.Path, "/api/models/")
	parts := strings.SplitN(rest, "/", 4)
	if len(parts) < 4 || parts[2] != "tree" {
		http.NotFound(w, r)
		return
	}
	s.mu.Lock()
	files, ok := s.repos[parts[0]+"/"+parts[1]+"@"+parts[3]]
	s.mu.Unlock()
	if !ok {
		http.Error(w, `{"error":"Repository not found"}`, http.StatusNotFound)
		return
	}
	fault := s.nextFault("@tree")
	switch {
	case fault.Status != 0:
		http.Error(w, "fault", fault.Status)
		return
	case fault.Delay > 0:
		// No answer at all for Delay.
		select {
		case <-time.After(fault.Delay):
		case <-r.Context().Done():
			return
		case <-s.closed:
			return
		}
	case fault.Stall:
		// The headers and the first byte, then nothing.
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte("["))
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-s.closed:
		}
		return
	}
	var entries []treeEntry
	dirs := map[string]bool{}
	for _, f := range files {
		if i := strings.LastIndex(f.Path, "/"); i > 0 {
			dirs[f.Path[:i]] = true
		}
		e := treeEntry{Type: "file", Path: f.Path, Size: len(f.Content), OID: BlobSHA1(f.Content)}
		if f.LFS {
			pointer := fmt.Sprintf("version https://git-lfs.github.com/spec/v1\noid sha256:%s\nsize %d\n", SHA256(f.Content), len(f.Content))
			e.OID = BlobSHA1([]byte(pointer))
			e.Size = len(f.Content)
			m := map[string]any{"oid": SHA256(f.Content), "size": len(f.Content), "pointerSize": len(pointer)}
			e.LFS = &m
		}
		entries = append(entries, e)
	}
	for d := range dirs {
		entries = append(entries, treeEntry{Type: "directory", Path: d, OID: "0000000000000000000000000000000000000000"})
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].Path < entries[j].Path })
	size := s.PageSize
	if size <= 0 {
		size = 2
	}
	start, _ := strconv.Atoi(r.URL.Query().Get("cursor"))
	end := min(start+size, len(entries))
	if start > len(entries) {
		start = len(entries)
	}
	if end < len(entries) {
		next := fmt.Sprintf("%s?recursive=true&cursor=%d", r.URL.Path, end)
		if !s.RelativeLinks {
			next = s.Hub.URL + next
		}
		w.Header().Set("Link", fmt.Sprintf(`<%s>; rel="next"`, next))
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(entries[start:end])
}
