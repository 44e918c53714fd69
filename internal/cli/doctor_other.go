//go:build !linux

package cli

// checkLandlock: Landlock is a Linux feature.
func checkLandlock() finding {
	return finding{Check: "landlock", Status: findingSkipped, Detail: "Linux only"}
}
