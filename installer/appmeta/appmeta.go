// Package appmeta reads the application's identity (name, ID, version,
// description, categories) from FyneApp.toml, the one place it is
// written, so that the .deb, the MSI and the Windows version resource all
// say the same thing.
//
// github.com/BurntSushi/toml v1.5.0 parses it: the TOML parser fyne
// itself uses for this file, so both read it the same way.
package appmeta

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/BurntSushi/toml"
)

// Meta is what FyneApp.toml says about the app.
type Meta struct {
	Website string
	Details struct {
		Icon    string
		Name    string
		ID      string
		Version string
		Build   int
	}
	LinuxAndBSD struct {
		GenericName string
		Categories  []string
		Comment     string
		Keywords    []string
	}
}

// semver is the version form both packagers accept: Debian orders it,
// and the MSI ProductVersion needs three numeric fields.
var semver = regexp.MustCompile(`^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)$`)

// Load reads and checks FyneApp.toml at path.
func Load(path string) (*Meta, error) {
	var m Meta
	// Fields this package does not use (FyneApp.toml may grow) are fine.
	if _, err := toml.DecodeFile(path, &m); err != nil {
		return nil, fmt.Errorf("read app metadata: %w", err)
	}
	if err := m.validate(); err != nil {
		return nil, fmt.Errorf("app metadata %s: %w", path, err)
	}
	return &m, nil
}

func (m *Meta) validate() error {
	d := m.Details
	switch {
	case d.Name == "":
		return fmt.Errorf("Details.Name is empty")
	case d.ID == "" || strings.ContainsAny(d.ID, " /\\"):
		return fmt.Errorf("Details.ID %q is not a reverse-DNS app ID", d.ID)
	case !semver.MatchString(d.Version):
		return fmt.Errorf("Details.Version %q is not MAJOR.MINOR.PATCH (numbers only): the MSI and the .deb both need that form", d.Version)
	case d.Build < 0 || d.Build > 65535:
		return fmt.Errorf("Details.Build %d is outside 0..65535 (a Windows version field)", d.Build)
	case m.LinuxAndBSD.Comment == "":
		return fmt.Errorf("LinuxAndBSD.Comment is empty (the one-line description of the packages)")
	}
	// MSI ProductVersion: major ≤ 255, minor ≤ 255, build ≤ 65535.
	limits := []int{255, 255, 65535}
	for i, f := range strings.Split(d.Version, ".") {
		if n, _ := strconv.Atoi(f); n > limits[i] {
			return fmt.Errorf("Details.Version %q: field %d must be at most %d (an MSI ProductVersion)", d.Version, i+1, limits[i])
		}
	}
	return nil
}

// Version is the release version, MAJOR.MINOR.PATCH.
func (m *Meta) Version() string { return m.Details.Version }

// WindowsVersion is the four-field version of the Windows version
// resource: the release version and the build number.
func (m *Meta) WindowsVersion() string {
	return fmt.Sprintf("%s.%d", m.Details.Version, m.Details.Build)
}
