package docker

import (
	"bufio"
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// A dynamically linked exechost (a `go install` with cgo on) cannot be the
// agent as it is: the image may have no C library, or another one. So the
// backend carries what the binary needs: it reads the binary's program
// interpreter (PT_INTERP) and shared libraries (DT_NEEDED, transitively),
// finds each on the host as the dynamic loader would (DT_RUNPATH/DT_RPATH,
// the directories of /etc/ld.so.conf, the standard directories), mounts
// them read-only into a private directory of the container beside the
// binary, and starts the agent through that loader with only that
// directory on its library path. Nothing of the image's own libraries is
// used.

// libMount is the directory in the container that holds the carried
// loader and libraries.
const libMount = "/.exechost/lib"

// runtimeLibs is what a dynamically linked agent binary needs in the
// container: its loader and the libraries, each by the name the loader
// looks for (the soname) with the host file that provides it.
type runtimeLibs struct {
	// Interp is the host file of the program interpreter, and InterpName
	// its base name, under which it is mounted in libMount.
	Interp, InterpName string
	// Libs maps each needed soname to the host file that provides it.
	Libs map[string]string
}

// entrypoint returns the container command that starts bin (mounted at
// agentMount) through the carried loader.
func (r *runtimeLibs) entrypoint() []string {
	return []string{libMount + "/" + r.InterpName, "--library-path", libMount, agentMount}
}

// files returns every host file to mount, keyed by its name in libMount.
func (r *runtimeLibs) files() map[string]string {
	out := map[string]string{r.InterpName: r.Interp}
	for name, path := range r.Libs {
		out[name] = path
	}
	return out
}

// errStatic means the binary needs no loader: it runs as it is.
var errStatic = errors.New("statically linked")

// resolveRuntime finds the loader and libraries the ELF binary at bin
// needs on this host; it returns errStatic for a static binary, and an
// error naming what is missing when something cannot be found.
func resolveRuntime(bin string) (*runtimeLibs, error) {
	f, err := elf.Open(bin)
	if err != nil {
		return nil, fmt.Errorf("agent binary %s: %w", bin, err)
	}
	defer f.Close()
	interp := ""
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			b := make([]byte, p.Filesz)
			if _, err := p.ReadAt(b, 0); err != nil {
				return nil, fmt.Errorf("agent binary %s: read its program interpreter: %w", bin, err)
			}
			interp = strings.TrimRight(string(b), "\x00")
		}
	}
	needed, _ := f.ImportedLibraries()
	if interp == "" {
		if len(needed) == 0 {
			return nil, errStatic
		}
		return nil, fmt.Errorf("agent binary %s needs shared libraries %v but names no loader", bin, needed)
	}
	host, err := filepath.EvalSymlinks(interp)
	if err != nil {
		return nil, fmt.Errorf("agent binary %s: its loader %s is not on this host: %w", bin, interp, err)
	}
	r := &runtimeLibs{Interp: host, InterpName: filepath.Base(interp), Libs: map[string]string{}}
	sys := systemLibDirs(filepath.Dir(host))
	// Breadth-first over DT_NEEDED, as the loader loads them.
	type want struct {
		name string
		from *elf.File
		path string // the file that needs it, for $ORIGIN
	}
	queue := []want{}
	for _, n := range needed {
		queue = append(queue, want{n, f, bin})
	}
	for len(queue) > 0 {
		w := queue[0]
		queue = queue[1:]
		if _, ok := r.Libs[w.name]; ok || w.name == r.InterpName {
			continue
		}
		path, err := findLib(w.name, w.from, w.path, f, sys)
		if err != nil {
			return nil, fmt.Errorf("agent binary %s: %w", bin, err)
		}
		r.Libs[w.name] = path
		lf, err := elf.Open(path)
		if err != nil {
			return nil, fmt.Errorf("agent binary %s: library %s: %w", bin, path, err)
		}
		more, _ := lf.ImportedLibraries()
		for _, n := range more {
			queue = append(queue, want{n, lf, path})
		}
		defer lf.Close()
	}
	return r, nil
}

// findLib finds soname as the loader would for a library needed by from
// (at path fromPath; exe is the executable): the needing object's
// DT_RPATH when it has no DT_RUNPATH, then its DT_RUNPATH, then the system
// directories; the first file there that is an ELF object of the
// executable's class and machine.
func findLib(soname string, from *elf.File, fromPath string, exe *elf.File, sys []string) (string, error) {
	if strings.Contains(soname, "/") {
		return checkLib(soname, exe)
	}
	var dirs []string
	runpath, _ := from.DynString(elf.DT_RUNPATH)
	if len(runpath) == 0 {
		rpath, _ := from.DynString(elf.DT_RPATH)
		dirs = append(dirs, splitPath(rpath, fromPath)...)
	}
	dirs = append(dirs, splitPath(runpath, fromPath)...)
	dirs = append(dirs, sys...)
	for _, d := range dirs {
		if p, err := checkLib(filepath.Join(d, soname), exe); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("shared library %s not found on this host (looked in %s)", soname, strings.Join(dirs, ", "))
}

// splitPath splits DT_RUNPATH/DT_RPATH entries, expanding $ORIGIN.
func splitPath(entries []string, fromPath string) []string {
	origin := filepath.Dir(fromPath)
	var out []string
	for _, e := range entries {
		for _, d := range strings.Split(e, ":") {
			d = strings.ReplaceAll(strings.ReplaceAll(d, "${ORIGIN}", origin), "$ORIGIN", origin)
			if d != "" {
				out = append(out, d)
			}
		}
	}
	return out
}

// checkLib returns the real path of the file at p when it is an ELF
// shared object the executable exe can load (same class and machine).
func checkLib(p string, exe *elf.File) (string, error) {
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return "", err
	}
	lf, err := elf.Open(real)
	if err != nil {
		return "", err
	}
	defer lf.Close()
	if lf.Class != exe.Class || lf.Machine != exe.Machine {
		return "", fmt.Errorf("%s: %s %s, not %s %s", p, lf.Class, lf.Machine, exe.Class, exe.Machine)
	}
	return real, nil
}

// systemLibDirs returns the directories the loader searches after an
// object's own paths: those /etc/ld.so.conf lists (what ld.so.cache is
// built from), the loader's own directory, then the standard ones.
func systemLibDirs(loaderDir string) []string {
	var out []string
	seen := map[string]bool{}
	add := func(d string) {
		if d != "" && !seen[d] {
			seen[d] = true
			out = append(out, d)
		}
	}
	for _, d := range ldSoConf("/etc/ld.so.conf", 0) {
		add(d)
	}
	add(loaderDir)
	for _, d := range []string{"/lib64", "/usr/lib64", "/lib", "/usr/lib"} {
		add(d)
	}
	return out
}

// ldSoConf reads the directories of an ld.so.conf file, following its
// include lines (globs, relative to the file's directory).
func ldSoConf(path string, depth int) []string {
	if depth > 8 {
		return nil
	}
	fh, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer fh.Close()
	var out []string
	sc := bufio.NewScanner(fh)
	for sc.Scan() {
		line, _, _ := strings.Cut(sc.Text(), "#")
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		if fields[0] == "include" {
			for _, pat := range fields[1:] {
				if !filepath.IsAbs(pat) {
					pat = filepath.Join(filepath.Dir(path), pat)
				}
				matches, _ := filepath.Glob(pat)
				for _, m := range matches {
					out = append(out, ldSoConf(m, depth+1)...)
				}
			}
			continue
		}
		for _, d := range fields {
			out = append(out, strings.TrimRight(d, "/"))
		}
	}
	return out
}
