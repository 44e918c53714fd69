//go:build !unix

package state

import "io/fs"

// checkOwner is a no-op where file ownership is not a uid (Windows); ACLs on
// the user profile directory protect the state directory there.
func checkOwner(fs.FileInfo) error { return nil }

// CheckOwner is checkOwner for other packages (the approvals store).
func CheckOwner(fi fs.FileInfo) error { return checkOwner(fi) }
