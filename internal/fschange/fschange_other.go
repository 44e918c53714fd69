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

// Watcher would own a change notifier; there is none here.
type Watcher struct{}

// watcher is never made here.
type watcher struct{}

// New returns a Watcher that refuses every Watch.
func New() *Watcher { return &Watcher{} }

// Shared returns the process's default Watcher.
func Shared() *Watcher { return &Watcher{} }

// Watch refuses.
func (*Watcher) Watch([]string) (Set, bool) { return Set{}, false }

// WatchContent refuses.
func (*Watcher) WatchContent([]string) (Set, bool) { return Set{}, false }

// WatchStat refuses.
func (*Watcher) WatchStat([]string) (Set, bool) { return Set{}, false }

// Poll returns the View that reports every Set changed.
func (*Watcher) Poll() View { return View{} }

// View is what one poll took in; nothing is watched here.
type View struct{}

// Poll returns the View that reports every Set changed.
func Poll() View { return View{} }

// Unchanged reports false: nothing is watched here.
func (View) Unchanged(Set) bool { return false }
