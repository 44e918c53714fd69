//go:build unix

package runner

import "syscall"

// ChildAttr returns the process attributes for a process that an
// in-process interpreter starts inside a command's run (see package
// shellrun): it stays in the run's process group, so a timeout or a dead
// daemon's reaper kills it with the rest, and it gets the parent-death
// signal where the platform has one.
func ChildAttr() *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{}
	setPdeathsig(a)
	return a
}

// PinThread pins the calling goroutine to its thread until the returned
// function runs; start and wait a ChildAttr process between the two, since
// the parent-death signal belongs to the forking thread.
func PinThread() func() { return lockThread() }
