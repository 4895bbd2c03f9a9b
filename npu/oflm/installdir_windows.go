package oflm

import (
	"fmt"

	"golang.org/x/sys/windows/registry"
)

// liveInstallFolder reads HKLM\Software\OpenFlowLM\oflm\InstallFolder,
// which oflm's MSI writes (src/wix/oflm.wxs @89e2799).
func liveInstallFolder() (string, error) {
	k, err := registry.OpenKey(registry.LOCAL_MACHINE, `Software\OpenFlowLM\oflm`, registry.QUERY_VALUE)
	if err != nil {
		return "", fmt.Errorf(`open HKLM\Software\OpenFlowLM\oflm: %w`, err)
	}
	defer k.Close()
	v, _, err := k.GetStringValue("InstallFolder")
	if err != nil {
		return "", fmt.Errorf(`read HKLM\Software\OpenFlowLM\oflm\InstallFolder: %w`, err)
	}
	return v, nil
}
