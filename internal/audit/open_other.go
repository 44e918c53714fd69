//go:build !unix

package audit

// openFlags adds nothing where O_NOFOLLOW does not exist; the state
// directory's ACLs protect the path there.
const openFlags = 0

// syncDir is a no-op: directories cannot be synced on Windows.
func syncDir(string) error { return nil }
