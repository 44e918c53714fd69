package service

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/exechost/exechost/internal/testdep"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// golden compares got with testdata/name, or rewrites it under -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (hint: go test ./internal/service -run %s -update)", err, t.Name())
	}
	if d := cmp.Diff(string(want), string(got)); d != "" {
		t.Errorf("%s differs (-golden +got; rerun with -update if intended):\n%s", path, d)
	}
}

// configs are the golden cases. Binary and StateDir are fixed so the
// golden files do not depend on the machine.
var configs = []struct {
	name string
	c    Config
}{
	{"node-user", Config{Kind: KindNode, Binary: "/usr/local/bin/exechost", StateDir: "/home/ada/.openclaw",
		Args: []string{"node", "run", "--gateway", "ws://gw.example:18789", "--display-name", "Ada's laptop", "--state-dir", "/home/ada/.openclaw"}}},
	{"node-system", Config{Kind: KindNode, System: true, User: "ada", Binary: "/usr/local/bin/exechost", StateDir: "/home/ada/.openclaw",
		Args: []string{"node", "run", "--gateway", "ws://gw.example:18789", "--state-dir", "/home/ada/.openclaw"}}},
	{"gateway-user", Config{Kind: KindGateway, Binary: "/usr/local/bin/exechost", StateDir: "/home/ada/.openclaw",
		Args: []string{"gateway", "--listen", "127.0.0.1:18789", "--state-dir", "/home/ada/.openclaw"}}},
	{"gateway-system", Config{Kind: KindGateway, System: true, User: "exechost", Binary: "/opt/exec host/exechost", StateDir: "/var/lib/exechost",
		ReadWritePaths: []string{"/srv/work dir"},
		Args:           []string{"gateway", "--config", "/etc/exechost/100%$HOME.json", "--state-dir", "/var/lib/exechost"}}},
	{"gateway-system-root-light", Config{Kind: KindGateway, System: true, Hardening: HardeningLight, Binary: "/usr/bin/exechost", StateDir: "/root/.openclaw",
		Args: []string{"gateway", "--state-dir", "/root/.openclaw"}}},
}

func TestSystemdUnitGolden(t *testing.T) {
	for _, tt := range configs {
		t.Run(tt.name, func(t *testing.T) {
			got, err := SystemdUnit(tt.c)
			if err != nil {
				t.Fatal(err)
			}
			golden(t, tt.name+".service", got)
		})
	}
}

func TestLaunchdPlistGolden(t *testing.T) {
	for _, tt := range configs {
		if tt.c.System && tt.c.User == "" {
			continue
		}
		t.Run(tt.name, func(t *testing.T) {
			got, err := LaunchdPlist(tt.c)
			if err != nil {
				t.Fatal(err)
			}
			golden(t, tt.name+".plist", got)
		})
	}
}

// analyzeVerify runs systemd-analyze verify on unit text installed under
// the unit's own name, and returns its combined output.
func analyzeVerify(t *testing.T, unit []byte, kind string, system bool) (string, error) {
	t.Helper()
	bin := testdep.Binary(t, "systemd-analyze")
	dir := t.TempDir()
	path := filepath.Join(dir, Name(kind)+".service")
	if err := os.WriteFile(path, unit, 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"verify", "--man=no", path}
	if !system {
		args = append([]string{"--user"}, args...)
	}
	cmd := exec.Command(bin, args...)
	runtimeDir := t.TempDir() // a user manager needs XDG_RUNTIME_DIR
	cmd.Env = append(os.Environ(), "XDG_RUNTIME_DIR="+runtimeDir, "SYSTEMD_LOG_LEVEL=notice")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func TestSystemdAnalyzeVerify(t *testing.T) {
	exe, err := os.Executable() // ExecStart must name an existing binary
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range configs {
		t.Run(tt.name, func(t *testing.T) {
			c := tt.c
			c.Binary = exe
			c.StateDir = t.TempDir()
			c.ReadWritePaths = nil
			if c.User != "" {
				c.User = "root" // must exist here
			}
			unit, err := SystemdUnit(c)
			if err != nil {
				t.Fatal(err)
			}
			out, err := analyzeVerify(t, unit, c.Kind, c.System)
			if err != nil || strings.TrimSpace(out) != "" {
				t.Errorf("systemd-analyze verify: %v\n%s\nunit:\n%s", err, out, unit)
			}
		})
	}
}

// TestSystemdAnalyzeCatchesBrokenUnit makes sure the check above can fail.
func TestSystemdAnalyzeCatchesBrokenUnit(t *testing.T) {
	unit := []byte("[Service]\nType=notify\nExecStart=relative/exechost node run\nBogusKey=1\n")
	out, err := analyzeVerify(t, unit, KindNode, true)
	if err == nil && strings.TrimSpace(out) == "" {
		t.Fatalf("systemd-analyze verify accepted a broken unit")
	}
}

func TestHardeningProfiles(t *testing.T) {
	base := Config{Binary: "/bin/exechost", StateDir: "/s", Args: []string{"x"}}
	tests := []struct {
		name          string
		kind, harden  string
		system        bool
		want, notWant []string
	}{
		{"node default is light", KindNode, "", true,
			[]string{"NoNewPrivileges=yes", "RestrictSUIDSGID=yes", "LockPersonality=yes"},
			[]string{"ProtectSystem", "ProtectHome", "MemoryDenyWriteExecute", "PrivateTmp", "SystemCallFilter"}},
		{"gateway default is strict", KindGateway, "", true,
			[]string{"ProtectSystem=strict", "ProtectHome=read-only", "ReadWritePaths=/s", "PrivateTmp=yes", "MemoryDenyWriteExecute=yes", "SystemCallArchitectures=native", "CapabilityBoundingSet=\n"},
			nil},
		{"strict user unit has no mount namespacing", KindGateway, HardeningStrict, false,
			[]string{"MemoryDenyWriteExecute=yes", "NoNewPrivileges=yes", "WantedBy=default.target"},
			[]string{"ProtectSystem", "ProtectHome", "PrivateTmp", "ReadWritePaths", "CapabilityBoundingSet"}},
		{"node may opt into strict", KindNode, HardeningStrict, true,
			[]string{"ProtectSystem=strict", "WantedBy=multi-user.target"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := base
			c.Kind, c.Hardening, c.System = tt.kind, tt.harden, tt.system
			b, err := SystemdUnit(c)
			if err != nil {
				t.Fatal(err)
			}
			unit := string(b)
			for _, w := range tt.want {
				if !strings.Contains(unit, w) {
					t.Errorf("unit lacks %q", w)
				}
			}
			for _, w := range tt.notWant {
				if strings.Contains(unit, w) {
					t.Errorf("unit has %q", w)
				}
			}
		})
	}
}

func TestSystemdQuote(t *testing.T) {
	tests := []struct {
		in, want string
		dollar   bool
	}{
		{"plain", "plain", true},
		{"with space", `"with space"`, true},
		{`quo"te`, `"quo\"te"`, true},
		{`back\slash`, `"back\\slash"`, true},
		{"100%", "100%%", true},
		{"$HOME", "$$HOME", true},
		{"$HOME", "$HOME", false},
		{"it's", `"it's"`, true},
		{"", `""`, true},
		{"a;b", `"a;b"`, true},
	}
	for _, tt := range tests {
		got, err := systemdQuote(tt.in, tt.dollar)
		if err != nil || got != tt.want {
			t.Errorf("systemdQuote(%q, %v) = %q, %v; want %q", tt.in, tt.dollar, got, err, tt.want)
		}
	}
}

func TestConfigRejected(t *testing.T) {
	ok := Config{Kind: KindNode, Binary: "/bin/exechost", StateDir: "/s"}
	tests := []struct {
		name string
		mod  func(*Config)
	}{
		{"unknown kind", func(c *Config) { c.Kind = "approver" }},
		{"relative binary", func(c *Config) { c.Binary = "exechost" }},
		{"relative state dir", func(c *Config) { c.StateDir = "state" }},
		{"newline in arg", func(c *Config) { c.Args = []string{"--x\nExecStartPre=/bin/rm -rf /"} }},
		{"newline in user", func(c *Config) { c.User = "ada\nUser=root" }},
		{"bad user", func(c *Config) { c.User = "a b" }},
		{"relative rw path", func(c *Config) { c.ReadWritePaths = []string{"rel"} }},
		{"bad hardening", func(c *Config) { c.Hardening = "medium" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := ok
			tt.mod(&c)
			if _, err := SystemdUnit(c); err == nil {
				t.Errorf("SystemdUnit accepted %+v", c)
			}
		})
	}
	if _, err := SystemdUnit(ok); err != nil {
		t.Errorf("SystemdUnit(valid) = %v", err)
	}
}

func TestPlistEscapes(t *testing.T) {
	b, err := LaunchdPlist(Config{Kind: KindNode, Binary: "/bin/exechost", StateDir: "/s",
		Args: []string{"--display-name", "<script>&'\""}})
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(b, []byte("<script>")) || !bytes.Contains(b, []byte("&lt;script&gt;&amp;")) {
		t.Errorf("plist does not escape XML:\n%s", b)
	}
}

func TestNotify(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "notify.sock")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	t.Setenv("NOTIFY_SOCKET", sock)
	for _, tt := range []struct {
		send func() error
		want string
	}{
		{NotifyReady, "READY=1"},
		{func() error { return NotifyStatus("serving on 127.0.0.1:18789") }, "STATUS=serving on 127.0.0.1:18789"},
		{NotifyStopping, "STOPPING=1"},
	} {
		if err := tt.send(); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 256)
		n, err := conn.Read(buf)
		if err != nil {
			t.Fatal(err)
		}
		if got := string(buf[:n]); got != tt.want {
			t.Errorf("notify sent %q, want %q", got, tt.want)
		}
	}
}

func TestNotifyOutsideSystemd(t *testing.T) {
	t.Setenv("NOTIFY_SOCKET", "")
	if err := NotifyReady(); err != nil {
		t.Errorf("NotifyReady without systemd = %v, want nil", err)
	}
}

func TestInstallNoStartAndUninstall(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("systemd paths")
	}
	cfg := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", cfg)
	c := Config{Kind: KindNode, Binary: "/usr/bin/exechost", StateDir: "/s", Args: []string{"node", "run"}}
	path, err := Install(context.Background(), c, InstallOptions{NoStart: true})
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(cfg, "systemd", "user", "exechost-node.service"); path != want {
		t.Errorf("installed at %s, want %s", path, want)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := SystemdUnit(c)
	if !bytes.Equal(got, want) {
		t.Errorf("installed unit differs from SystemdUnit")
	}
	fi, _ := os.Stat(path)
	if fi.Mode().Perm() != 0o644 {
		t.Errorf("unit mode %v, want 0644", fi.Mode().Perm())
	}
	// Uninstall removes the file even when no user manager runs here; the
	// failed stop is reported.
	var out bytes.Buffer
	_, err = Uninstall(context.Background(), KindNode, false, &out)
	if _, serr := os.Stat(path); !errors.Is(serr, os.ErrNotExist) {
		t.Errorf("unit still there after Uninstall (err %v)", err)
	}
	if _, err := Uninstall(context.Background(), KindNode, false, &out); !errors.Is(err, ErrNotInstalled) {
		t.Errorf("second Uninstall = %v, want ErrNotInstalled", err)
	}
	if err := Status(context.Background(), KindNode, false, &out); !errors.Is(err, ErrNotInstalled) {
		t.Errorf("Status after Uninstall = %v, want ErrNotInstalled", err)
	}
}
