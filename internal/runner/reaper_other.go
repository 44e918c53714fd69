//go:build !unix

package runner

// EnableReaper does nothing where commands run in a job object (Windows):
// the job already takes the command's process tree down with the runner.
func EnableReaper() error { return nil }

func reaperTrack(int) (func(), error) { return func() {}, nil }
