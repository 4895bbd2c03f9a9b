// Package hub downloads files from a Hugging Face repository, written
// in-house (see docs/models.md for why no library): the tree API (with
// Link-header pagination) gives each file's size, git blob SHA-1 and, for
// LFS files, SHA-256; resolve URLs are fetched following redirects to the
// CDN, resumed from ".partial" files with Range requests, retried with
// backoff on network errors and 5xx answers, and verified against those
// hashes before a file is moved into place. A file that fails its hash is
// never installed.
//
// The Authorization header goes only to the endpoint's host: Go's
// http.Client already drops it on a redirect to another host name, and
// this client's CheckRedirect also drops it when only the port differs.
// TLS certificates are always verified.
//
// Dependencies: golang.org/x/sys (v0.50.0, the version known to work
// here) for the free-disk-space check (Statfs on Unix,
// GetDiskFreeSpaceEx on Windows); nothing else outside the standard
// library.
package hub

import (
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Client talks to one Hugging Face endpoint. The zero value is not
// usable; set Endpoint, and leave the rest nil for the real network,
// clock and file system.
type Client struct {
	// Endpoint is https://huggingface.co or a mirror (HF_ENDPOINT).
	Endpoint string
	// Token is sent as "Authorization: Bearer" to the endpoint's host only.
	Token string
	// HTTP is the client used (NewHTTPClient() in the program); nil
	// means http.DefaultTransport with CheckRedirect.
	HTTP *http.Client
	// Now and Sleep are the clock; nil means the real one.
	Now   func() time.Time
	Sleep func(ctx context.Context, d time.Duration) error
	// FS creates the .partial files; nil means the OS.
	FS FS
	// Attempts is how many times a failing request is tried (default 5).
	Attempts int
	// Backoff is the first wait between attempts, doubled each time up to
	// 30 s (default 1 s).
	Backoff time.Duration
	// IdleTimeout aborts a transfer that delivers no byte for this long,
	// so that it can be retried (default 60 s).
	IdleTimeout time.Duration
	// ProgressEvery is the least time between two progress events of one
	// file (default 200 ms); the last event of a file is always sent.
	ProgressEvery time.Duration
}

// File is one file of a repository as the tree API describes it.
type File struct {
	Path string `json:"path"`
	Size int64  `json:"size"`
	// BlobID is the git blob SHA-1 (tree "oid").
	BlobID string `json:"blob_id"`
	// SHA256 is the LFS object id; empty for plain git files.
	SHA256 string `json:"sha256,omitempty"`
}

// Progress is one progress event of a download.
type Progress struct {
	File  string
	Bytes int64 // bytes of the file on disk so far
	Total int64 // size of the file
	Rate  float64
	ETA   time.Duration
	Done  bool // the file is complete and verified
}

// FS creates files; tests swap it to inject write failures.
type FS interface {
	OpenFile(name string, flag int, perm os.FileMode) (WritableFile, error)
}

// WritableFile is what FS.OpenFile returns.
type WritableFile interface {
	io.Writer
	io.Closer
	Sync() error
}

// OSFS is the real file system.
type OSFS struct{}

// OpenFile opens a file with os.OpenFile.
func (OSFS) OpenFile(name string, flag int, perm os.FileMode) (WritableFile, error) {
	return os.OpenFile(name, flag, perm)
}

// HTTPError is a response the client will not retry or that kept failing.
type HTTPError struct {
	Status int
	URL    string
	Msg    string
}

func (e *HTTPError) Error() string { return e.Msg }

// UnreachableError is a hub the client could not talk to at all (no
// name resolution, no route, refused, timed out), as opposed to one that
// answered with an error (HTTPError). Installs word it for a person
// ("cannot reach Hugging Face") and keep Err as the detail.
type UnreachableError struct {
	Endpoint string // the hub's address, e.g. https://huggingface.co
	Err      error  // what the network said
}

func (e *UnreachableError) Error() string {
	return fmt.Sprintf("%v; cannot reach %s", e.Err, e.Endpoint)
}

func (e *UnreachableError) Unwrap() error { return e.Err }

// ErrHashMismatch is wrapped by a download whose content does not match
// the hash the hub recorded, after every attempt.
var ErrHashMismatch = errors.New("content does not match the hash recorded by the hub")

// NewHTTPClient returns the client used when Client.HTTP is nil: the
// environment's proxy, certificate verification on (TLS 1.2 or newer),
// at most 10 redirects, and Authorization dropped on any redirect that
// leaves the original host and port.
func NewHTTPClient() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	t.ResponseHeaderTimeout = 60 * time.Second
	return &http.Client{Transport: t, CheckRedirect: CheckRedirect}
}

// CheckRedirect limits redirects to 10 and removes the Authorization
// header when a redirect goes to another host or port (Go itself only
// compares host names).
func CheckRedirect(req *http.Request, via []*http.Request) error {
	if len(via) >= 10 {
		return errors.New("stopped after 10 redirects")
	}
	if req.URL.Host != via[0].URL.Host || req.URL.Scheme != via[0].URL.Scheme {
		req.Header.Del("Authorization")
	}
	return nil
}

func (c *Client) http() *http.Client {
	if c.HTTP != nil {
		return c.HTTP
	}
	// The standard library's shared transport (certificates verified),
	// with this package's redirect rule.
	return &http.Client{CheckRedirect: CheckRedirect}
}

func (c *Client) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

func (c *Client) sleep(ctx context.Context, d time.Duration) error {
	if c.Sleep != nil {
		return c.Sleep(ctx, d)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func (c *Client) fs() FS {
	if c.FS != nil {
		return c.FS
	}
	return OSFS{}
}

func (c *Client) attempts() int {
	if c.Attempts > 0 {
		return c.Attempts
	}
	return 5
}

func (c *Client) backoff(n int) time.Duration {
	d := c.Backoff
	if d <= 0 {
		d = time.Second
	}
	for i := 1; i < n && d < 30*time.Second; i++ {
		d *= 2
	}
	return min(d, 30*time.Second)
}

func (c *Client) endpoint() (*url.URL, error) {
	u, err := url.Parse(strings.TrimRight(c.Endpoint, "/"))
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, fmt.Errorf("hub endpoint %q is not an http(s) URL", c.Endpoint)
	}
	return u, nil
}

// ResolveURL is where a file is downloaded from:
// {endpoint}/{repo}/resolve/{revision}/{path}.
func (c *Client) ResolveURL(repo, revision, file string) (string, error) {
	u, err := c.endpoint()
	if err != nil {
		return "", err
	}
	if err := checkRepo(repo); err != nil {
		return "", err
	}
	var segs []string
	for _, s := range strings.Split(file, "/") {
		segs = append(segs, url.PathEscape(s))
	}
	return u.String() + "/" + repo + "/resolve/" + url.PathEscape(revision) + "/" + strings.Join(segs, "/"), nil
}

// TreeURL is the first page of the recursive file listing.
func (c *Client) TreeURL(repo, revision string) (string, error) {
	u, err := c.endpoint()
	if err != nil {
		return "", err
	}
	if err := checkRepo(repo); err != nil {
		return "", err
	}
	return u.String() + "/api/models/" + repo + "/tree/" + url.PathEscape(revision) + "?recursive=true", nil
}

func checkRepo(repo string) error {
	parts := strings.Split(repo, "/")
	if len(parts) != 2 || parts[0] == "" || parts[1] == "" || strings.ContainsAny(repo, "?#\\ \x00") || parts[0] == ".." || parts[1] == ".." {
		return fmt.Errorf("repository %q is not of the form owner/name", repo)
	}
	return nil
}

// newRequest builds a GET that carries the token only to the endpoint's
// host.
func (c *Client) newRequest(ctx context.Context, rawURL string) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("User-Agent", "npuchat")
	req.Header.Set("Accept-Encoding", "identity")
	if ep, err := c.endpoint(); err == nil && c.Token != "" && req.URL.Host == ep.Host && req.URL.Scheme == ep.Scheme {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	return req, nil
}

// statusError turns a failed response into an error a person can act on,
// and says whether it is worth retrying.
func statusError(resp *http.Response, what string) (err error, retry bool) {
	u := resp.Request.URL.Redacted()
	e := &HTTPError{Status: resp.StatusCode, URL: u}
	switch {
	case resp.StatusCode == http.StatusUnauthorized:
		e.Msg = fmt.Sprintf("%s: Hugging Face answered 401 Unauthorized: the token is missing or invalid (set HF_TOKEN, or put a valid token in ~/.cache/huggingface/token)", what)
	case resp.StatusCode == http.StatusForbidden:
		e.Msg = fmt.Sprintf("%s: Hugging Face answered 403 Forbidden: the repository may be gated (accept its terms on the model page) or the token lacks read access", what)
	case resp.StatusCode == http.StatusNotFound:
		e.Msg = fmt.Sprintf("%s: Hugging Face answered 404 Not Found: the repository, revision or file does not exist, or it is private and needs a token (HF_TOKEN)", what)
	case resp.StatusCode == http.StatusTooManyRequests:
		e.Msg = fmt.Sprintf("%s: Hugging Face answered %s: too many downloads from this address for now; wait a few minutes and install again (what was downloaded is kept) (%s)", what, resp.Status, u)
		return e, true
	case resp.StatusCode >= 500:
		e.Msg = fmt.Sprintf("%s: Hugging Face (or the mirror in HF_ENDPOINT) answered %s: the server is failing or busy, not this computer; try again in a few minutes (what was downloaded is kept) (%s)", what, resp.Status, u)
		return e, true
	default:
		e.Msg = fmt.Sprintf("%s: unexpected answer %s from %s", what, resp.Status, u)
	}
	// The hub explains itself in X-Error-Code / X-Error-Message
	// (GatedRepo, RepoNotFound, EntryNotFound, RevisionNotFound).
	if code, msg := resp.Header.Get("X-Error-Code"), resp.Header.Get("X-Error-Message"); code != "" || msg != "" {
		e.Msg += fmt.Sprintf(" (hub: %s)", strings.TrimSpace(code+" "+msg))
	}
	return e, false
}

// retryable reports whether err (from a request or a body read) is a
// network failure worth another attempt.
func retryable(ctx context.Context, err error) bool {
	if ctx.Err() != nil {
		return false
	}
	var he *HTTPError
	if errors.As(err, &he) {
		return he.Status == http.StatusTooManyRequests || he.Status >= 500
	}
	var we *writeError
	if errors.As(err, &we) {
		return false
	}
	var se *safetyError
	return !errors.As(err, &se)
}

// Commit resolves a revision (a branch such as "main", or a tag) to the
// commit it points at now, with GET /api/models/{repo}/revision/{rev}
// (the answer's "sha"). Listing and downloading at that commit, rather
// than at the branch name, keeps every file of an install from the same
// commit even when the repository changes meanwhile (otherwise every
// hash would fail). A revision that is already a commit id is returned
// as it is, without a request.
func (c *Client) Commit(ctx context.Context, repo, revision string) (string, error) {
	if isCommitID(revision) {
		return revision, nil
	}
	u, err := c.endpoint()
	if err != nil {
		return "", err
	}
	if err := checkRepo(repo); err != nil {
		return "", err
	}
	what := fmt.Sprintf("resolve %s@%s", repo, revision)
	target := u.String() + "/api/models/" + repo + "/revision/" + url.PathEscape(revision)
	var sha string
	err = c.retry(ctx, func() error {
		rctx, idle := c.idleContext(ctx)
		defer idle.stop()
		req, err := c.newRequest(rctx, target)
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		resp, err := c.http().Do(req)
		if err != nil {
			return idle.wrap(ctx, what, err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			err, _ := statusError(resp, what)
			return err
		}
		var info struct {
			SHA string `json:"sha"`
		}
		body := &idleReader{r: io.LimitReader(resp.Body, 16<<20), reset: idle.reset}
		if err := json.NewDecoder(body).Decode(&info); err != nil {
			if idle.fired() || ctx.Err() != nil {
				return idle.wrap(ctx, what, err)
			}
			return &safetyError{fmt.Sprintf("%s: the answer is not the expected JSON: %v", what, err)}
		}
		if !isCommitID(info.SHA) {
			return &safetyError{fmt.Sprintf("%s: the answer has no commit id (sha %q)", what, info.SHA)}
		}
		sha = info.SHA
		return nil
	})
	var he *HTTPError
	var se *safetyError
	if err != nil && ctx.Err() == nil && !errors.As(err, &he) && !errors.As(err, &se) {
		return "", &UnreachableError{Endpoint: c.Endpoint, Err: err}
	}
	return sha, err
}

// isCommitID reports whether s is a full git commit id (40 hex digits).
func isCommitID(s string) bool {
	if len(s) != 40 {
		return false
	}
	for _, r := range s {
		if !strings.ContainsRune("0123456789abcdef", r) {
			return false
		}
	}
	return true
}

// Tree lists every file of repo at revision, following the Link header's
// rel="next" pages. It refuses the whole listing when an entry's path
// would escape a target folder.
func (c *Client) Tree(ctx context.Context, repo, revision string) ([]File, error) {
	next, err := c.TreeURL(repo, revision)
	if err != nil {
		return nil, err
	}
	what := fmt.Sprintf("list %s@%s", repo, revision)
	var files []File
	for pages := 0; next != ""; pages++ {
		if pages > 1000 {
			return nil, fmt.Errorf("%s: more than 1000 pages", what)
		}
		var page []treeEntry
		var link string
		err := c.retry(ctx, func() error {
			var err error
			page, link, err = c.treePage(ctx, next, what)
			return err
		})
		var he *HTTPError
		if err != nil && ctx.Err() == nil && !errors.As(err, &he) {
			return nil, &UnreachableError{Endpoint: c.Endpoint, Err: err}
		}
		if err != nil {
			return nil, err
		}
		for _, e := range page {
			if e.Type != "file" {
				continue
			}
			if err := SafePath(e.Path); err != nil {
				return nil, fmt.Errorf("%s: %w", what, err)
			}
			f := File{Path: e.Path, Size: e.Size, BlobID: e.OID}
			if e.LFS != nil {
				f.SHA256 = e.LFS.OID
				if e.LFS.Size > 0 {
					f.Size = e.LFS.Size
				}
			}
			files = append(files, f)
		}
		next, err = resolveLink(next, link)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
	}
	return files, nil
}

type treeEntry struct {
	Type string `json:"type"`
	Path string `json:"path"`
	Size int64  `json:"size"`
	OID  string `json:"oid"`
	LFS  *struct {
		OID  string `json:"oid"`
		Size int64  `json:"size"`
	} `json:"lfs"`
}

// treePage fetches one page of the listing. Like a download, it is
// abandoned (and retried by the caller) when no byte arrives for
// IdleTimeout, so that a stalled hub cannot hold the install lock
// forever.
func (c *Client) treePage(ctx context.Context, u, what string) ([]treeEntry, string, error) {
	rctx, idle := c.idleContext(ctx)
	defer idle.stop()
	req, err := c.newRequest(rctx, u)
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", what, err)
	}
	resp, err := c.http().Do(req)
	if err != nil {
		return nil, "", idle.wrap(ctx, what, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		err, _ := statusError(resp, what)
		return nil, "", err
	}
	var page []treeEntry
	body := &idleReader{r: io.LimitReader(resp.Body, 64<<20), reset: idle.reset}
	if err := json.NewDecoder(body).Decode(&page); err != nil {
		if idle.fired() || ctx.Err() != nil {
			return nil, "", idle.wrap(ctx, what, err)
		}
		return nil, "", fmt.Errorf("%s: the tree answer is not the expected JSON list: %w", what, err)
	}
	return page, resp.Header.Get("Link"), nil
}

// idleTimer cancels a request's context when no byte arrived for the
// client's IdleTimeout.
type idleTimer struct {
	d      time.Duration
	t      *time.Timer
	mu     sync.Mutex
	stalls bool
}

// idleContext returns a context cancelled after IdleTimeout without
// progress (progress is reported with reset).
func (c *Client) idleContext(ctx context.Context) (context.Context, *idleTimer) {
	d := c.IdleTimeout
	if d <= 0 {
		d = 60 * time.Second
	}
	rctx, cancel := context.WithCancel(ctx)
	it := &idleTimer{d: d}
	it.t = time.AfterFunc(d, func() {
		it.mu.Lock()
		it.stalls = true
		it.mu.Unlock()
		cancel()
	})
	return rctx, it
}

func (it *idleTimer) reset() { it.t.Reset(it.d) }
func (it *idleTimer) stop()  { it.t.Stop() }

func (it *idleTimer) fired() bool {
	it.mu.Lock()
	defer it.mu.Unlock()
	return it.stalls
}

// wrap describes a failed request: the caller's cancellation, a stall
// (retryable), or err itself.
func (it *idleTimer) wrap(ctx context.Context, what string, err error) error {
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("%s: %w", what, ctx.Err())
	case it.fired():
		return fmt.Errorf("%s: no data for %s", what, it.d)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// idleReader reports every read that made progress.
type idleReader struct {
	r     io.Reader
	reset func()
}

func (r *idleReader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if n > 0 {
		r.reset()
	}
	return n, err
}

// resolveLink finds rel="next" in a Link header and resolves it against
// the current page's URL. No next link gives "".
func resolveLink(current, header string) (string, error) {
	for _, part := range strings.Split(header, ",") {
		segs := strings.Split(part, ";")
		target := strings.TrimSpace(segs[0])
		if !strings.HasPrefix(target, "<") || !strings.HasSuffix(target, ">") {
			continue
		}
		for _, p := range segs[1:] {
			p = strings.ReplaceAll(strings.TrimSpace(p), " ", "")
			if p == `rel="next"` || p == "rel=next" {
				base, err := url.Parse(current)
				if err != nil {
					return "", err
				}
				ref, err := url.Parse(target[1 : len(target)-1])
				if err != nil {
					return "", fmt.Errorf("bad next link %q: %w", target, err)
				}
				return base.ResolveReference(ref).String(), nil
			}
		}
	}
	return "", nil
}

// retry runs op until it succeeds, fails for good, or the attempts run
// out, sleeping with exponential backoff between attempts.
func (c *Client) retry(ctx context.Context, op func() error) error {
	var err error
	for n := 1; ; n++ {
		if err = op(); err == nil {
			return nil
		}
		if !retryable(ctx, err) || n >= c.attempts() {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return err
		}
		if serr := c.sleep(ctx, c.backoff(n)); serr != nil {
			return serr
		}
	}
}

// safetyError marks a refused file name.
type safetyError struct{ msg string }

func (e *safetyError) Error() string { return e.msg }

// SafePath checks that a repository path names a file inside a folder:
// relative, with "/" separators, no "..", "." or empty parts, no
// backslash, drive letter, colon or NUL, no part ending in a dot or
// space and no Windows device name.
func SafePath(p string) error {
	bad := func(why string) error {
		return &safetyError{fmt.Sprintf("refusing file name %q from the server: %s", p, why)}
	}
	switch {
	case p == "":
		return bad("empty")
	case strings.ContainsRune(p, 0):
		return bad("contains NUL")
	case strings.Contains(p, `\`):
		return bad("contains a backslash")
	case strings.HasPrefix(p, "/"):
		return bad("absolute path")
	case strings.Contains(p, ":"):
		return bad("contains a colon (drive letter or stream)")
	}
	for _, s := range strings.Split(p, "/") {
		if s == "" || s == "." || s == ".." {
			return bad("has an empty, . or .. part")
		}
		// Windows drops trailing dots and spaces ("..." is the folder
		// itself) and maps device names (NUL, COM1) to devices.
		if strings.HasSuffix(s, ".") || strings.HasSuffix(s, " ") {
			return bad("a part ends in a dot or space")
		}
		if windowsDevice(s) {
			return bad("a part is a Windows device name")
		}
	}
	if path.Clean(p) != p {
		return bad("not a clean path")
	}
	return nil
}

func windowsDevice(s string) bool {
	base := strings.ToUpper(s)
	if i := strings.IndexByte(base, '.'); i >= 0 {
		base = base[:i]
	}
	base = strings.TrimRight(base, " ")
	switch base {
	case "CON", "PRN", "AUX", "NUL", "CONIN$", "CONOUT$":
		return true
	}
	if len(base) == 4 && (strings.HasPrefix(base, "COM") || strings.HasPrefix(base, "LPT")) && base[3] >= '0' && base[3] <= '9' {
		return true
	}
	return false
}

// Join places a repository path inside dir, after SafePath.
func Join(dir, p string) (string, error) {
	if err := SafePath(p); err != nil {
		return "", err
	}
	return filepath.Join(dir, filepath.FromSlash(p)), nil
}

// Verify hashes the file at name and compares it with f's recorded hash:
// SHA-256 for LFS files, the git blob SHA-1 otherwise.
func Verify(ctx context.Context, name string, f File) error {
	in, err := os.Open(name)
	if err != nil {
		return err
	}
	defer in.Close()
	st, err := in.Stat()
	if err != nil {
		return err
	}
	if f.Size >= 0 && st.Size() != f.Size {
		return fmt.Errorf("%s: size %d, the hub records %d: %w", name, st.Size(), f.Size, ErrHashMismatch)
	}
	h, want := newHasher(f)
	if want == "" {
		return fmt.Errorf("%s: the hub recorded no hash for %s", name, f.Path)
	}
	if _, err := io.Copy(h, ctxReader{ctx, in}); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); !strings.EqualFold(got, want) {
		return fmt.Errorf("%s: hash %s, the hub records %s: %w", name, got, want, ErrHashMismatch)
	}
	return nil
}

// newHasher returns the hash that verifies f and the expected hex value.
// A git blob hash starts with "blob <size>\0".
func newHasher(f File) (hash.Hash, string) {
	if f.SHA256 != "" {
		return sha256.New(), f.SHA256
	}
	h := sha1.New()
	h.Write([]byte("blob " + strconv.FormatInt(f.Size, 10) + "\x00"))
	return h, f.BlobID
}

// HashFile returns the SHA-256 of a file, hex encoded.
func HashFile(ctx context.Context, name string) (string, error) {
	in, err := os.Open(name)
	if err != nil {
		return "", err
	}
	defer in.Close()
	h := sha256.New()
	if _, err := io.Copy(h, ctxReader{ctx, in}); err != nil {
		return "", fmt.Errorf("hash %s: %w", name, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (r ctxReader) Read(p []byte) (int, error) {
	if err := r.ctx.Err(); err != nil {
		return 0, err
	}
	return r.r.Read(p)
}
