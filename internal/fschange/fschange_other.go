//go:build !linux

package fschange

// Watch refuses: there is no exact change notification here.
func Watch([]string) (Set, bool) { return Set{}, false }

// Unchanged reports false: nothing is watched here.
func Unchanged(Set) bool { return false }

// WatchContent refuses: there is no exact change notification here.
func WatchContent([]string) (Set, bool) { return Set{}, false }
