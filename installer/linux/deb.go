package linux

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/xml"
	"fmt"
	"image"
	_ "image/png" // icon sizes are checked by decoding them
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"text/template"
	"time"

	"github.com/goreleaser/nfpm/v2"
	_ "github.com/goreleaser/nfpm/v2/deb" // registers the deb packager

	"github.com/npuchat/npuchat/installer/appmeta"
)

// Options says what to package and where.
type Options struct {
	// Root is the repository's root: FyneApp.toml, cmd/trayapp, gui/icons
	// and installer/linux.
	Root string
	// Out is the folder the .deb is written to.
	Out string
	// Work is a scratch folder for the staged files.
	Work string
	// Binary, when set, is a built npuchat to package instead of
	// building one.
	Binary string
	// Date is the release date (changelog, metainfo, man page, file
	// times); zero means now.
	Date time.Time
	// Log receives the build's progress and go build's output.
	Log io.Writer
}

// Build stages and packs the .deb and returns its path.
func Build(ctx context.Context, o Options) (string, error) {
	if o.Log == nil {
		o.Log = io.Discard
	}
	if o.Date.IsZero() {
		o.Date = time.Now()
	}
	o.Date = o.Date.UTC().Truncate(time.Second)
	meta, err := appmeta.Load(filepath.Join(o.Root, "FyneApp.toml"))
	if err != nil {
		return "", err
	}
	stage := filepath.Join(o.Work, "deb")
	if err := os.RemoveAll(stage); err != nil {
		return "", fmt.Errorf("deb: clear %s: %w", stage, err)
	}
	if err := os.MkdirAll(stage, 0o755); err != nil {
		return "", fmt.Errorf("deb: %w", err)
	}
	bin := filepath.Join(stage, "npuchat")
	if o.Binary != "" {
		if err := copyFile(o.Binary, bin, 0o755); err != nil {
			return "", fmt.Errorf("deb: %w", err)
		}
	} else if err := BuildBinary(ctx, o.Root, bin, meta.Version(), o.Log); err != nil {
		return "", err
	}
	if err := stageGenerated(o.Root, stage, meta, o.Date); err != nil {
		return "", fmt.Errorf("deb: %w", err)
	}
	if err := StageIcons(filepath.Join(o.Root, "gui", "icons"), filepath.Join(stage, "icons"), meta.Details.ID); err != nil {
		return "", fmt.Errorf("deb: %w", err)
	}
	return pack(o, meta, stage)
}

// BuildBinary compiles the tray build of cmd/trayapp for linux/amd64
// into out: cgo on (fyne needs it), a position-independent executable
// with full RELRO (Debian's hardening flags), stripped, with the version
// from FyneApp.toml.
func BuildBinary(ctx context.Context, root, out, version string, log io.Writer) error {
	fmt.Fprintf(log, "deb: go build ./cmd/trayapp (linux/amd64, cgo) -> %s\n", out)
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-buildmode=pie",
		"-ldflags", "-s -w -linkmode=external -extldflags '-Wl,-z,relro,-z,now' -X main.version="+version,
		"-o", out, "./cmd/trayapp")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=1", "GOOS=linux", "GOARCH=amd64")
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("deb: go build ./cmd/trayapp: %w", err)
	}
	return nil
}

// pageData is what the templates in installer/linux/files see.
type pageData struct {
	*appmeta.Meta
	Date string
}

// stageGenerated renders the desktop entry, metainfo, man page and
// changelog from FyneApp.toml into stage.
func stageGenerated(root, stage string, meta *appmeta.Meta, date time.Time) error {
	files := filepath.Join(root, "installer", "linux", "files")
	funcs := template.FuncMap{"xml": xmlText, "desktop": desktopValue}
	data := pageData{Meta: meta, Date: date.Format("2006-01-02")}
	render := func(tmpl string) ([]byte, error) {
		t, err := template.New(tmpl).Funcs(funcs).Option("missingkey=error").ParseFiles(filepath.Join(files, tmpl))
		if err != nil {
			return nil, err
		}
		var b bytes.Buffer
		if err := t.Execute(&b, data); err != nil {
			return nil, fmt.Errorf("render %s: %w", tmpl, err)
		}
		return b.Bytes(), nil
	}
	id := meta.Details.ID
	for _, f := range []struct{ tmpl, out string }{
		{"dev.npuchat.app.desktop.tmpl", id + ".desktop"},
		{"dev.npuchat.app.metainfo.xml.tmpl", id + ".metainfo.xml"},
	} {
		b, err := render(f.tmpl)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(stage, f.out), b, 0o644); err != nil {
			return err
		}
	}
	man, err := render("npuchat.1.tmpl")
	if err != nil {
		return err
	}
	if err := writeGzip(filepath.Join(stage, "npuchat.1.gz"), man); err != nil {
		return err
	}
	return writeGzip(filepath.Join(stage, "changelog.gz"), []byte(Changelog(meta, date)))
}

// Changelog is the package's Debian changelog (a native package: one
// entry for this version).
func Changelog(meta *appmeta.Meta, date time.Time) string {
	return fmt.Sprintf("npuchat (%s) unstable; urgency=medium\n\n  * NPU Chat %s.\n\n -- %s  %s\n",
		meta.Version(), meta.Version(), maintainer, date.UTC().Format("Mon, 02 Jan 2006 15:04:05 -0700"))
}

// maintainer matches nfpm.yaml's maintainer field.
const maintainer = "NPU Chat <packaging@npuchat.dev>"

// writeGzip writes b gzipped as Debian wants it: best compression, no
// file name or time in the header (reproducible).
func writeGzip(path string, b []byte) error {
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return err
	}
	if _, err := zw.Write(b); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}

// iconName matches the app icon set's files, npuchat-<size>.png.
var iconName = regexp.MustCompile(`^npuchat-([0-9]+)\.png$`)

// StageIcons copies gui/icons/npuchat-<N>.png into a hicolor tree
// (<N>x<N>/apps/<id>.png) under dst, checking that each PNG really is
// N×N. The icon theme spec needs a 48×48 one.
func StageIcons(src, dst, id string) error {
	entries, err := os.ReadDir(src)
	if err != nil {
		return fmt.Errorf("icons: %w (the app icons come from gui/icons/npuchat-<size>.png)", err)
	}
	var sizes []int
	for _, e := range entries {
		m := iconName.FindStringSubmatch(e.Name())
		if m == nil {
			continue
		}
		n, _ := strconv.Atoi(m[1])
		p := filepath.Join(src, e.Name())
		f, err := os.Open(p)
		if err != nil {
			return fmt.Errorf("icons: %w", err)
		}
		cfg, _, err := image.DecodeConfig(f)
		f.Close()
		if err != nil {
			return fmt.Errorf("icons: %s: %w", p, err)
		}
		if cfg.Width != n || cfg.Height != n {
			return fmt.Errorf("icons: %s is %d×%d, but its name says %d×%d", p, cfg.Width, cfg.Height, n, n)
		}
		out := filepath.Join(dst, fmt.Sprintf("%dx%d", n, n), "apps", id+".png")
		if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
			return err
		}
		if err := copyFile(p, out, 0o644); err != nil {
			return fmt.Errorf("icons: %w", err)
		}
		sizes = append(sizes, n)
	}
	sort.Ints(sizes)
	if i := sort.SearchInts(sizes, 48); i == len(sizes) || sizes[i] != 48 {
		return fmt.Errorf("icons: %s has no npuchat-48.png (found sizes %v); the hicolor theme needs 48×48", src, sizes)
	}
	return nil
}

// pack fills nfpm.yaml in and writes the .deb into o.Out.
func pack(o Options, meta *appmeta.Meta, stage string) (string, error) {
	vars := map[string]string{
		"VERSION": meta.Version(),
		"WEBSITE": meta.Website,
		"STAGE":   stage,
		"FILES":   filepath.Join(o.Root, "installer", "linux", "files"),
	}
	var unknown []string
	mapping := func(k string) string {
		v, ok := vars[k]
		if !ok && !strings.HasPrefix(k, "NFPM_") { // nfpm asks for its signing passphrases
			unknown = append(unknown, k)
		}
		return v
	}
	cfg, err := nfpm.ParseFileWithEnvMapping(filepath.Join(o.Root, "installer", "linux", "nfpm.yaml"), mapping)
	if err != nil {
		return "", fmt.Errorf("deb: nfpm.yaml: %w", err)
	}
	info, err := cfg.Get("deb")
	if err != nil {
		return "", fmt.Errorf("deb: %w", err)
	}
	for _, s := range []*string{&info.Scripts.PreInstall, &info.Scripts.PostInstall, &info.Scripts.PreRemove, &info.Scripts.PostRemove} {
		*s = os.Expand(*s, mapping)
	}
	if len(unknown) > 0 {
		return "", fmt.Errorf("deb: nfpm.yaml uses unknown variables %v", unknown)
	}
	info.MTime = o.Date
	info = nfpm.WithDefaults(info)
	pkg, err := nfpm.Get("deb")
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(o.Out, 0o755); err != nil {
		return "", fmt.Errorf("deb: %w", err)
	}
	target := filepath.Join(o.Out, pkg.ConventionalFileName(info))
	info.Target = target
	tmp := target + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return "", fmt.Errorf("deb: %w", err)
	}
	err = pkg.Package(info, f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, target)
	}
	if err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("deb: pack %s: %w", target, err)
	}
	fmt.Fprintf(o.Log, "deb: wrote %s\n", target)
	return target, nil
}

// xmlText escapes s for XML text and attribute values.
func xmlText(s string) (string, error) {
	var b strings.Builder
	if err := xml.EscapeText(&b, []byte(s)); err != nil {
		return "", err
	}
	return b.String(), nil
}

// desktopValue checks that s can be a desktop entry value (one line, no
// list separator) and escapes backslashes.
func desktopValue(s string) (string, error) {
	if strings.ContainsAny(s, "\n\r;") {
		return "", fmt.Errorf("%q cannot be a desktop entry value (newline or ';')", s)
	}
	return strings.ReplaceAll(s, `\`, `\\`), nil
}

func copyFile(src, dst string, mode os.FileMode) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, b, mode)
}
