package cli

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/exechost/exechost/internal/service"
)

// execService runs `exechost KIND SUBCOMMAND…` with the service commands
// attached to a stand-in parent, as the node and gateway files attach them.
func execService(t *testing.T, kind string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errb bytes.Buffer
	g := &globals{stdout: &out, stderr: &errb}
	root := &cobra.Command{Use: "exechost", SilenceUsage: true, SilenceErrors: true}
	root.PersistentFlags().StringVar(&g.stateDir, "state-dir", "", "")
	parent := &cobra.Command{Use: kind}
	parent.AddCommand(serviceCommands(g, kind)...)
	root.AddCommand(parent)
	root.SetOut(&out)
	root.SetErr(&errb)
	root.SetArgs(append([]string{kind}, args...))
	err = root.Execute()
	return out.String(), errb.String(), err
}

func TestServiceInstallPrint(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("prints a systemd unit")
	}
	dir := t.TempDir()
	tests := []struct {
		kind string
		args []string
		want []string
	}{
		{service.KindNode, []string{"--gateway", "ws://gw:18789", "--display-name", "my box"},
			[]string{"node run --gateway ws://gw:18789 --state-dir " + dir + ` --display-name "my box"`, "Type=notify", "Hardening profile: light"}},
		{service.KindGateway, []string{"--listen", "127.0.0.1:18789", "--system", "--user", "root", "--rw-path", "/srv", "--", "--verbose"},
			[]string{"gateway --state-dir " + dir + " --listen 127.0.0.1:18789 --verbose", "User=root", "ReadWritePaths=" + dir + " /srv", "WantedBy=multi-user.target"}},
		{service.KindGateway, []string{"--hardening", "light"},
			[]string{"Hardening profile: light", "WantedBy=default.target"}},
	}
	for _, tt := range tests {
		t.Run(tt.kind+strings.Join(tt.args, " "), func(t *testing.T) {
			out, stderr, err := execService(t, tt.kind, append([]string{"install", "--print", "--state-dir", dir}, tt.args...)...)
			if err != nil {
				t.Fatalf("%v\n%s", err, stderr)
			}
			for _, w := range tt.want {
				if !strings.Contains(out, w) {
					t.Errorf("unit lacks %q:\n%s", w, out)
				}
			}
		})
	}
}

func TestServiceInstallUsage(t *testing.T) {
	for _, args := range [][]string{
		{"install", "--print", "--hardening", "medium"},
		{"install", "--print", "--user", "root"}, // --user without --system
		{"install", "--print", "stray"},          // extra args need --
	} {
		_, _, err := execService(t, service.KindNode, append(args, "--state-dir", t.TempDir())...)
		var ue usageError
		if !errors.As(err, &ue) {
			t.Errorf("%v: err %v, want a usage error", args, err)
		}
	}
}

func TestServiceInstallNoStartUninstall(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("systemd paths")
	}
	cfg := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", cfg)
	stateDir := filepath.Join(t.TempDir(), "state")
	out, stderr, err := execService(t, service.KindNode, "install", "--no-start", "--state-dir", stateDir)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	unit := filepath.Join(cfg, "systemd", "user", "exechost-node.service")
	if !strings.Contains(out, "installed "+unit) {
		t.Errorf("output %q does not name %s", out, unit)
	}
	if !strings.Contains(stderr, "not paired yet") {
		t.Errorf("no pairing note for a node without node.json: %q", stderr)
	}
	if fi, err := os.Stat(stateDir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("state directory not prepared 0700: %v %v", fi, err)
	}
	data, err := os.ReadFile(unit)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), "--state-dir "+stateDir) {
		t.Errorf("unit does not pass the state directory:\n%s", data)
	}
	// Uninstall removes the unit even where no systemd runs (it reports
	// the failed stop then).
	out, _, _ = execService(t, service.KindNode, "uninstall")
	if _, err := os.Stat(unit); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("unit still present after uninstall")
	}
	if !strings.Contains(out, "removed "+unit) {
		t.Errorf("uninstall output %q does not name %s", out, unit)
	}
	_, _, err = execService(t, service.KindNode, "status")
	if !errors.Is(err, service.ErrNotInstalled) || !strings.Contains(err.Error(), "hint:") {
		t.Errorf("status after uninstall = %v, want not installed with a hint", err)
	}
	_, _, err = execService(t, service.KindNode, "uninstall")
	if !errors.Is(err, service.ErrNotInstalled) {
		t.Errorf("second uninstall = %v, want ErrNotInstalled", err)
	}
}
