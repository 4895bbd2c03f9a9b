package amdxdna

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"unsafe"
)

// TestLayoutMatchesC compiles testdata/layout.c (the uapi structs and
// macros) with cc and compares the C compiler's ioctl numbers, sizes and
// offsets with the Go mirror. cc comes from build-essential (scripts/setup).
func TestLayoutMatchesC(t *testing.T) {
	cc, err := exec.LookPath("cc")
	if err != nil {
		t.Fatal("cc not found: run scripts/setup (build-essential)")
	}
	bin := filepath.Join(t.TempDir(), "layout")
	if b, err := exec.Command(cc, "-o", bin, "testdata/layout.c").CombinedOutput(); err != nil {
		t.Fatalf("cc: %v\n%s", err, b)
	}
	out, err := exec.Command(bin).Output()
	if err != nil {
		t.Fatal(err)
	}
	var v drmVersion
	var g getInfo
	want := strings.Join([]string{
		fmt.Sprintf("version %#x", IoctlVersion),
		fmt.Sprintf("get_info %#x", IoctlGetInfo),
		fmt.Sprintf("drm_version size %d name_len %d name %d date_len %d date %d desc_len %d desc %d",
			unsafe.Sizeof(v), unsafe.Offsetof(v.NameLen), unsafe.Offsetof(v.Name), unsafe.Offsetof(v.DateLen),
			unsafe.Offsetof(v.Date), unsafe.Offsetof(v.DescLen), unsafe.Offsetof(v.Desc)),
		fmt.Sprintf("get_info size %d buffer %d", unsafe.Sizeof(g), unsafe.Offsetof(g.Buffer)),
		// decodeAIEMetadata reads cols at 4, rows at 6, version at 8 of a 64-byte struct.
		fmt.Sprintf("aie_metadata size %d cols 4 rows 6 version 8", aieMetadataSize),
	}, "\n") + "\n"
	if string(out) != want {
		t.Errorf("C says:\n%s\nGo says:\n%s", out, want)
	}
}
