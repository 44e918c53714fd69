//go:build !linux

package fschange

// Watch refuses: there is no exact change notification here.
func Watch([]string) (Set, bool) { return Set{}, false }

// Unchanged reports false: nothing is watched here.
func Unchanged(Set) bool { return false }

// WatchContent refuses: there is no exact change notification here.
func WatchContent([]string) (Set, bool) { return Set{}, false }

// WatchStat refuses: there is no exact change notification here.
func WatchStat([]string) (Set, bool) { return Set{}, false }

// View is what one poll took in; nothing is watched here.
type View struct{}

// Poll returns the View that reports every Set changed.
func Poll() View { return View{} }

// Unchanged reports false: nothing is watched here.
func (View) Unchanged(Set) bool { return false }
