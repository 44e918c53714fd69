//go:build !linux

package fschange

// Unchanged reports false: nothing is watched here.
func Unchanged(Set) bool { return false }

// Watcher would own a change notifier; there is none here.
type Watcher struct{}

// watcher is never made here.
type watcher struct{}

// New returns a Watcher that refuses every Watch.
func New() *Watcher { return &Watcher{} }

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

// Unchanged reports false: nothing is watched here.
func (View) Unchanged(Set) bool { return false }
