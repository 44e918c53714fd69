//go:build !kubernetes

package pick

// kubeBuilt says the Kubernetes driver is linked into this test binary.
const kubeBuilt = false
