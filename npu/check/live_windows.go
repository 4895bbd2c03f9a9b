package check

import (
	"errors"
	"fmt"

	"golang.org/x/sys/windows"
	"golang.org/x/sys/windows/registry"
)

// liveWindows is the running Windows system, read through SetupAPI, the
// configuration manager and the registry.
type liveWindows struct{}

func newLiveWindows() (WindowsSystem, error) { return liveWindows{}, nil }

// spdrpClass is SPDRP_CLASS (the class name, such as "ComputeAccelerator").
const spdrpClass windows.SPDRP = 0x00000007

// Devices enumerates every present device (all classes, so that the
// current ComputeAccelerator driver, the legacy System-class IPU driver
// and a device with no driver at all are all found) and keeps the ones
// with an AMD NPU hardware id.
func (liveWindows) Devices() ([]WinDevice, error) {
	set, err := windows.SetupDiGetClassDevsEx(nil, "", 0, windows.DIGCF_PRESENT|windows.DIGCF_ALLCLASSES, 0, "")
	if err != nil {
		return nil, fmt.Errorf("SetupDiGetClassDevsEx: %w", err)
	}
	defer set.Close()
	var out []WinDevice
	for i := 0; ; i++ {
		data, err := set.EnumDeviceInfo(i)
		if errors.Is(err, windows.ERROR_NO_MORE_ITEMS) {
			break
		}
		if err != nil {
			continue
		}
		ids := stringsProp(set, data, windows.SPDRP_HARDWAREID)
		if _, ok := matchNPU(ids); !ok {
			continue
		}
		d := WinDevice{
			HardwareIDs: ids,
			ClassGUID:   stringProp(set, data, windows.SPDRP_CLASSGUID),
			Class:       stringProp(set, data, spdrpClass),
			Description: stringProp(set, data, windows.SPDRP_DEVICEDESC),
			DriverKey:   stringProp(set, data, windows.SPDRP_DRIVER),
		}
		if id, err := set.DeviceInstanceID(data); err == nil {
			d.InstanceID = id
		}
		var status, problem uint32
		if err := windows.CM_Get_DevNode_Status(&status, &problem, data.DevInst, 0); err != nil {
			d.StatusError = err.Error()
		} else {
			d.Status, d.Problem = status, problem
		}
		if d.DriverKey != "" {
			d.DriverVersion, err = driverVersion(d.DriverKey)
			if err != nil {
				d.DriverVersionError = err.Error()
			}
		}
		out = append(out, d)
	}
	return out, nil
}

// driverVersion reads DriverVersion from the device's driver key.
func driverVersion(driverKey string) (string, error) {
	name := `SYSTEM\CurrentControlSet\Control\Class\` + driverKey
	k, err := registry.OpenKey(registry.LOCAL_MACHINE, name, registry.QUERY_VALUE)
	if err != nil {
		return "", fmt.Errorf(`open HKLM\%s: %w`, name, err)
	}
	defer k.Close()
	v, _, err := k.GetStringValue("DriverVersion")
	if err != nil {
		return "", fmt.Errorf(`read HKLM\%s\DriverVersion: %w`, name, err)
	}
	return v, nil
}

func stringProp(set windows.DevInfo, data *windows.DevInfoData, p windows.SPDRP) string {
	v, err := set.DeviceRegistryProperty(data, p)
	if err != nil {
		return ""
	}
	switch s := v.(type) {
	case string:
		return s
	case []string:
		if len(s) > 0 {
			return s[0]
		}
	}
	return ""
}

func stringsProp(set windows.DevInfo, data *windows.DevInfoData, p windows.SPDRP) []string {
	v, err := set.DeviceRegistryProperty(data, p)
	if err != nil {
		return nil
	}
	switch s := v.(type) {
	case []string:
		return s
	case string:
		return []string{s}
	}
	return nil
}
