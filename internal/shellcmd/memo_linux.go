package shellcmd

import (
	"os"
	"syscall"
)

// statFields are the parts of a stat result an analysis can depend on:
// the file's type and permissions, which file it is, and when it or its
// entries last changed.
type statFields struct {
	mode         uint32
	dev, ino     uint64
	size         int64
	mtime, ctime syscall.Timespec
}

func fieldsFromStat(st *syscall.Stat_t) statFields {
	return statFields{mode: st.Mode, dev: st.Dev, ino: st.Ino, size: st.Size, mtime: st.Mtim, ctime: st.Ctim}
}

// fieldsOf returns fi's statFields, or false when fi carries no stat data.
func fieldsOf(fi os.FileInfo) (statFields, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return statFields{}, false
	}
	return fieldsFromStat(st), true
}

// readStat stats (follow) or lstats path into a factResult without the
// allocations of an os.FileInfo: the memo's check reads every fact on
// every reuse.
func readStat(path string, follow bool) (factResult, bool) {
	var st syscall.Stat_t
	var err error
	for {
		if follow {
			err = syscall.Stat(path, &st)
		} else {
			err = syscall.Lstat(path, &st)
		}
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		return errFact(err)
	}
	return factResult{stat: fieldsFromStat(&st)}, true
}
