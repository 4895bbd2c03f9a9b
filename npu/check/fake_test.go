package check

import (
	"context"
	"io/fs"
	"path"
	"sort"
	"strings"

	"github.com/npuchat/npuchat/npu/amdxdna"
	"github.com/npuchat/npuchat/npu/xrt"
)

// memFS is an in-memory FS for building scenarios: files with content,
// symlinks, and empty directories; parents exist implicitly.
type memFS struct {
	files map[string]string
	links map[string]string
	dirs  map[string]bool
}

func newMemFS() *memFS {
	return &memFS{files: map[string]string{}, links: map[string]string{}, dirs: map[string]bool{}}
}

func (m *memFS) clone() *memFS {
	c := newMemFS()
	for k, v := range m.files {
		c.files[k] = v
	}
	for k, v := range m.links {
		c.links[k] = v
	}
	for k, v := range m.dirs {
		c.dirs[k] = v
	}
	return c
}

// removeAll deletes name and everything below it.
func (m *memFS) removeAll(name string) {
	for _, mp := range []map[string]string{m.files, m.links} {
		for k := range mp {
			if k == name || strings.HasPrefix(k, name+"/") {
				delete(mp, k)
			}
		}
	}
	for k := range m.dirs {
		if k == name || strings.HasPrefix(k, name+"/") {
			delete(m.dirs, k)
		}
	}
}

func (m *memFS) ReadFile(name string) ([]byte, error) {
	if s, ok := m.files[name]; ok {
		return []byte(s), nil
	}
	return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
}

func (m *memFS) ReadDir(name string) ([]string, error) {
	set := map[string]bool{}
	add := func(p string) {
		if rest, ok := strings.CutPrefix(p, name+"/"); ok {
			set[strings.Split(rest, "/")[0]] = true
		}
	}
	for k := range m.files {
		add(k)
	}
	for k := range m.links {
		add(k)
	}
	for k := range m.dirs {
		add(k)
	}
	if len(set) == 0 && !m.dirs[name] {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	names := make([]string, 0, len(set))
	for n := range set {
		names = append(names, n)
	}
	sort.Strings(names)
	return names, nil
}

func (m *memFS) Readlink(name string) (string, error) {
	if t, ok := m.links[name]; ok {
		return t, nil
	}
	return "", &fs.PathError{Op: "readlink", Path: name, Err: fs.ErrNotExist}
}

func (m *memFS) Exists(name string) bool {
	if _, ok := m.files[name]; ok {
		return true
	}
	if _, ok := m.links[name]; ok {
		return true
	}
	_, err := m.ReadDir(name)
	return err == nil
}

func (m *memFS) Glob(pattern string) ([]string, error) {
	names, err := m.ReadDir(path.Dir(pattern))
	if err != nil {
		return nil, nil
	}
	var out []string
	for _, n := range names {
		if ok, _ := path.Match(path.Base(pattern), n); ok {
			out = append(out, path.Join(path.Dir(pattern), n))
		}
	}
	return out, nil
}

// fakeLinux is a LinuxSystem with fixed answers.
type fakeLinux struct {
	uname     Uname
	memlock   Rlimit
	access    map[string]error
	open      map[string]error
	drm       amdxdna.DRMVersion
	fw        amdxdna.FirmwareVersion
	fwErr     error
	aie       amdxdna.AIEMetadata
	kmsg      []string
	kmsgErr   error
	openCount int
}

func (f *fakeLinux) Uname() (Uname, error)    { return f.uname, nil }
func (f *fakeLinux) Memlock() (Rlimit, error) { return f.memlock, nil }
func (f *fakeLinux) Access(p string) error    { return f.access[p] }
func (f *fakeLinux) Open(p string) (Device, error) {
	if err := f.open[p]; err != nil {
		return nil, err
	}
	f.openCount++
	return &fakeDevice{f}, nil
}
func (f *fakeLinux) KernelLog() ([]string, error) { return f.kmsg, f.kmsgErr }

type fakeDevice struct{ f *fakeLinux }

func (d *fakeDevice) Version() (amdxdna.DRMVersion, error)       { return d.f.drm, nil }
func (d *fakeDevice) Firmware() (amdxdna.FirmwareVersion, error) { return d.f.fw, d.f.fwErr }
func (d *fakeDevice) AIEMetadata() (amdxdna.AIEMetadata, error)  { return d.f.aie, nil }
func (d *fakeDevice) Close() error                               { d.f.openCount--; return nil }

// fakeXRT answers probes with fixed results.
type fakeXRT struct {
	load, open xrt.Result
	err        error
}

func (p *fakeXRT) Probe(ctx context.Context, lib string, openDevice bool) (xrt.Result, error) {
	if openDevice {
		r := p.open
		r.Library = lib
		return r, p.err
	}
	r := p.load
	r.Library = lib
	return r, nil
}

type fakeWindows struct {
	devices []WinDevice
	err     error
}

func (f fakeWindows) Devices() ([]WinDevice, error) { return f.devices, f.err }
