//go:build !windows

package asksock

// platformSupported reports whether the approval socket can check its
// peers here. Unix systems without peer credentials in peercred still fail
// closed per connection.
func platformSupported() error { return nil }
