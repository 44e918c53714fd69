package jail

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// fixedSocketDirs are the socket directories every view masks (unless a
// named socket is inside): what a host's services listen in. /tmp's
// (.X11-unix, tmux-*, …) are gone with the private /tmp; they are masked
// again when a writable root brings the host's /tmp back.
var fixedSocketDirs = []string{"/run", "/var/run", "/tmp/.X11-unix", "/tmp/.ICE-unix", "/tmp/tmux-*", "/tmp/screen*", "/tmp/ssh-*", "/dev/shm"}

// clone is a detached copy of a mount tree (open_tree), to be attached at
// path once the rest of the view is built.
type clone struct {
	path string
	fd   int
}

// buildView makes the server's mount namespace the jail's view (package
// doc). It runs before anything is served, in the server's own mount
// namespace; any error fails the jail (nothing half-built serves).
func buildView(o *Options, freshProc bool) error {
	c := &o.Confine
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make mounts private: %w", err)
	}
	writesAll := slices.Contains(c.Writable, "/")
	// Copies of what stays writable and of the named sockets, taken
	// before anything is made read-only or masked.
	var roots, socks, reads []clone
	defer func() {
		for _, cl := range slices.Concat(roots, socks, reads) {
			if cl.fd >= 0 {
				unix.Close(cl.fd)
			}
		}
	}()
	if !writesAll {
		for _, p := range c.Writable {
			fd, err := unix.OpenTree(unix.AT_FDCWD, p, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE)
			if errors.Is(err, unix.ENOENT) {
				continue // nothing to write there; it stays absent
			}
			if err != nil {
				return fmt.Errorf("writable root %s: %w", p, err)
			}
			roots = append(roots, clone{p, fd})
		}
	}
	if !writesAll {
		for _, p := range o.Readable {
			if !strings.HasPrefix(p, "/tmp/") {
				// Only /tmp is replaced: the rest is there. /tmp itself
				// is never bound back (the view's /tmp stays private).
				continue
			}
			fd, err := unix.OpenTree(unix.AT_FDCWD, p, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
			if err != nil {
				continue // gone: nothing to find there
			}
			reads = append(reads, clone{p, fd})
		}
	}
	for _, p := range c.Sockets {
		fd, err := unix.OpenTree(unix.AT_FDCWD, p, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
		if errors.Is(err, unix.ENOENT) {
			continue
		}
		if err != nil {
			return fmt.Errorf("socket %s: %w", p, err)
		}
		socks = append(socks, clone{p, fd})
	}
	if !writesAll {
		// Contents and metadata: EROFS for every write, chmod, chown,
		// xattr, utimes, link and mknod; no set-uid anywhere.
		attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID}
		if err := unix.MountSetattr(unix.AT_FDCWD, "/", unix.AT_RECURSIVE, &attr); err != nil {
			return fmt.Errorf("make / read-only: %w", err)
		}
	}
	// A private /tmp, unless the run may write anywhere (it keeps the
	// host's then: what it writes there is meant to stay; /tmp's socket
	// directories are masked below all the same).
	if !writesAll {
		if err := unix.Mount("tmpfs", "/tmp", "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=1777"); err != nil {
			return fmt.Errorf("private /tmp: %w", err)
		}
	}
	for i := range roots {
		cl := &roots[i]
		attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV}
		if err := unix.MountSetattr(cl.fd, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, &attr); err != nil {
			return fmt.Errorf("writable root %s: %w", cl.path, err)
		}
		if cl.path == "/tmp" || strings.HasPrefix(cl.path, "/tmp/") {
			_ = os.MkdirAll(cl.path, 0o700) // on the private /tmp
		}
		if err := unix.MoveMount(cl.fd, "", unix.AT_FDCWD, cl.path, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
			return fmt.Errorf("writable root %s: %w", cl.path, err)
		}
		unix.Close(cl.fd)
		cl.fd = -1
	}
	for i := range reads {
		cl := &reads[i]
		attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV}
		if err := unix.MountSetattr(cl.fd, "", unix.AT_EMPTY_PATH, &attr); err != nil {
			return fmt.Errorf("readable %s: %w", cl.path, err)
		}
		shown, err := mountPoint(cl)
		if err != nil {
			return fmt.Errorf("readable %s: %w", cl.path, err)
		}
		if shown {
			continue // a file an earlier entry (its directory) shows already
		}
		if err := unix.MoveMount(cl.fd, "", unix.AT_FDCWD, cl.path, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
			return fmt.Errorf("readable %s: %w", cl.path, err)
		}
		unix.Close(cl.fd)
		cl.fd = -1
	}
	for _, p := range c.ReadOnly {
		if err := rebindReadOnly(p); err != nil {
			return err
		}
	}
	masks := append(slices.Clone(c.Protected), c.Hidden...)
	for _, d := range append(slices.Clone(fixedSocketDirs), o.SocketDirs...) {
		m, _ := filepath.Glob(d)
		masks = append(masks, m...)
	}
	for _, p := range masks {
		if err := mask(p, socks); err != nil {
			return err
		}
	}
	if freshProc {
		if err := unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
			return fmt.Errorf("fresh /proc: %w", err)
		}
	}
	return nil
}

// rebindReadOnly makes p (a persistence path inside a writable root)
// read-only, contents and metadata. A path that does not exist is left:
// the Landlock layer refuses creating it (ReadOnly is protected there).
func rebindReadOnly(p string) error {
	fd, err := unix.OpenTree(unix.AT_FDCWD, p, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE)
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read-only %s: %w", p, err)
	}
	defer unix.Close(fd)
	attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV}
	if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, &attr); err != nil {
		return fmt.Errorf("read-only %s: %w", p, err)
	}
	if err := unix.MoveMount(fd, "", unix.AT_FDCWD, p, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return fmt.Errorf("read-only %s: %w", p, err)
	}
	return nil
}

// mask replaces p in the view: a directory by an empty read-only tmpfs
// (holding only the named sockets beneath it), anything else by
// /dev/null. A path that does not exist is not there to mask.
func mask(p string, socks []clone) error {
	if r, err := filepath.EvalSymlinks(p); err == nil {
		p = r // /var/run -> /run: mask where it really is
	}
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil {
		return nil
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		if err := unix.Mount("/dev/null", p, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("hide %s: %w", p, err)
		}
		return unix.Mount("", p, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "")
	}
	if err := unix.Mount("tmpfs", p, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "mode=0755,size=64k"); err != nil {
		return fmt.Errorf("hide %s: %w", p, err)
	}
	for i := range socks {
		s := &socks[i]
		if s.fd < 0 || !strings.HasPrefix(s.path, p+"/") {
			continue
		}
		if err := os.MkdirAll(filepath.Dir(s.path), 0o755); err != nil {
			return fmt.Errorf("socket %s: %w", s.path, err)
		}
		f, err := os.OpenFile(s.path, os.O_CREATE|os.O_WRONLY, 0o600)
		if err != nil {
			return fmt.Errorf("socket %s: %w", s.path, err)
		}
		f.Close()
		if err := unix.MoveMount(s.fd, "", unix.AT_FDCWD, s.path, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
			return fmt.Errorf("socket %s: %w", s.path, err)
		}
		unix.Close(s.fd)
		s.fd = -1
	}
	attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}
	if err := unix.MountSetattr(unix.AT_FDCWD, p, 0, &attr); err != nil {
		return fmt.Errorf("hide %s: %w", p, err)
	}
	return nil
}

// loopbackUp brings up the network namespace's own loopback.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("loopback: %w", err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return fmt.Errorf("loopback: %w", err)
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("loopback: %w", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("loopback: %w", err)
	}
	return nil
}

// mountPoint makes the place cl is attached at on the private /tmp: a
// directory for a directory, an empty file for a file (a single program
// made readable, such as the interpreter's binary under `go test`).
// A file already there is shown by an earlier entry (a search path
// directory bound read-only holds it): shown, and nothing is made.
func mountPoint(cl *clone) (shown bool, err error) {
	var st unix.Stat_t
	if err := unix.Fstat(cl.fd, &st); err != nil {
		return false, err
	}
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		return false, os.MkdirAll(cl.path, 0o755)
	}
	if _, err := os.Lstat(cl.path); err == nil {
		return true, nil
	}
	if err := os.MkdirAll(filepath.Dir(cl.path), 0o755); err != nil {
		return false, err
	}
	f, err := os.OpenFile(cl.path, os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return false, err
	}
	return false, f.Close()
}
