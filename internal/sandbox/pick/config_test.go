package pick_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/exechost/exechost/internal/runner"
	"github.com/exechost/exechost/internal/sandbox"
	"github.com/exechost/exechost/internal/sandbox/bwrap"
	"github.com/exechost/exechost/internal/sandbox/docker"
	"github.com/exechost/exechost/internal/sandbox/kubernetes"
	"github.com/exechost/exechost/internal/sandbox/pick"
)

// TestConfigJSON: exechost.json's "sandbox" object as users write it, with
// each built-in driver's section decoded, defaulted and validated by that
// driver's registration, and written back unchanged.
func TestConfigJSON(t *testing.T) {
	in := `{"backend":"docker","scope":"agent","idleTimeout":"90s","workspace":"/srv/ws","agent":"off","agentBinary":"/opt/exechost",
		"docker":{"image":"img:1","readOnlyRoot":false,"memory":"1g","cpus":0.5,"pidsLimit":64},
		"bwrap":{"landlock":"require","roBind":["/opt/tools"]},
		"kubernetes":{"namespace":"sbx","agentImage":"exechost/agent:1","poolSize":2,"allowEgress":true,
			"runtimeClassName":"gvisor","nodeSelector":{"sandbox":"yes"},"requests":{"cpu":"100m"},
			"tolerations":[{"key":"sandbox","operator":"Exists","effect":"NoSchedule"}],
			"podTemplate":{"metadata":{"labels":{"team":"a"}},"spec":{"priorityClassName":"low"}}}}`
	var c sandbox.Config
	if err := json.Unmarshal([]byte(in), &c); err != nil {
		t.Fatal(err)
	}
	c = c.WithDefaults()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.Backend != docker.Name || c.Scope != sandbox.ScopeAgent || time.Duration(c.IdleTimeout) != 90*time.Second || c.AgentBinary != "/opt/exechost" {
		t.Errorf("common keys = %+v", c)
	}
	f := false
	if diff := cmp.Diff(docker.Config{Image: "img:1", Network: "none", User: sandbox.DefaultUser, ReadOnlyRoot: &f,
		Memory: "1g", CPUs: 0.5, PidsLimit: 64, TmpfsSize: sandbox.DefaultTmpfsSize}, docker.ConfigOf(c)); diff != "" {
		t.Errorf("docker (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(bwrap.Config{Landlock: bwrap.LandlockRequire, PidsLimit: sandbox.DefaultPidsLimit, TmpfsSize: sandbox.DefaultTmpfsSize,
		ROBind: []string{"/opt/tools"}}, bwrap.ConfigOf(c)); diff != "" {
		t.Errorf("bwrap (-want +got):\n%s", diff)
	}
	k := kubernetes.ConfigOf(c)
	if k.Namespace != "sbx" || k.Image != sandbox.DefaultImage || k.PullPolicy != "IfNotPresent" || k.RunAsUser != 65534 ||
		k.PoolSize != 2 || !k.AllowEgress || k.RuntimeClassName != "gvisor" || k.NodeSelector["sandbox"] != "yes" ||
		k.Requests["cpu"] != "100m" || len(k.Tolerations) != 1 || len(k.PodTemplate) == 0 {
		t.Errorf("kubernetes = %+v", k)
	}
	out, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	var back sandbox.Config
	if err := json.Unmarshal(out, &back); err != nil {
		t.Fatalf("round trip: %v", err)
	}
	back = back.WithDefaults()
	if diff := cmp.Diff(docker.ConfigOf(c), docker.ConfigOf(back)); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(kubernetes.ConfigOf(c), kubernetes.ConfigOf(back)); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
}

func TestValidateNamesTheKey(t *testing.T) {
	tests := []struct {
		name    string
		mutate  func(sandbox.Config) sandbox.Config
		wantKey string
	}{
		{"memory", dk(func(d *docker.Config) { d.Memory = "12q" }), "sandbox.docker.memory:"},
		{"tmpfs", dk(func(d *docker.Config) { d.TmpfsSize = "-1" }), "sandbox.docker.tmpfsSize:"},
		{"user", dk(func(d *docker.Config) { d.User = "a b" }), "sandbox.docker.user:"},
		{"landlock", bw(func(b *bwrap.Config) { b.Landlock = "maybe" }), "sandbox.bwrap.landlock:"},
		{"bwrap memory", bw(func(b *bwrap.Config) { b.Memory = "lots" }), "sandbox.bwrap.memory:"},
		{"roBind", bw(func(b *bwrap.Config) { b.ROBind = []string{"/ok", "rel"} }), "sandbox.bwrap.roBind[1]:"},
		{"k8s agentImage", func(c sandbox.Config) sandbox.Config { c.Backend = kubernetes.Name; return c }, "sandbox.kubernetes.agentImage:"},
		{"k8s pullPolicy", kb(func(k *kubernetes.Config) { k.PullPolicy = "Sometimes" }), "sandbox.kubernetes.pullPolicy:"},
		{"k8s memory", kb(func(k *kubernetes.Config) { k.Memory = "lots" }), "sandbox.kubernetes.memory:"},
		{"k8s pool", kb(func(k *kubernetes.Config) { k.PoolSize = -1 }), "sandbox.kubernetes.poolSize:"},
		{"k8s kubeconfig", kb(func(k *kubernetes.Config) { k.Kubeconfig = "kube/config" }), "sandbox.kubernetes.kubeconfig:"},
		{"k8s requests", kb(func(k *kubernetes.Config) { k.Requests = map[string]string{"cpu": "lots"} }), "sandbox.kubernetes.requests.cpu:"},
		{"k8s requests gpu", kb(func(k *kubernetes.Config) { k.Requests = map[string]string{"gpu": "1"} }), "sandbox.kubernetes.requests.gpu:"},
		{"k8s toleration", kb(func(k *kubernetes.Config) { k.Tolerations = []kubernetes.Toleration{{Operator: "Maybe"}} }), "sandbox.kubernetes.tolerations[0].operator:"},
		{"k8s template containers", kb(func(k *kubernetes.Config) {
			k.PodTemplate = json.RawMessage(`{"spec":{"containers":[{"name":"x","image":"y"}]}}`)
		}), "sandbox.kubernetes.podTemplate: spec.containers:"},
		{"k8s template host", kb(func(k *kubernetes.Config) { k.PodTemplate = json.RawMessage(`{"spec":{"hostPID":true}}`) }), "sandbox.kubernetes.podTemplate: spec.hostNetwork/hostPID/hostIPC:"},
		{"k8s template typo", kb(func(k *kubernetes.Config) { k.PodTemplate = json.RawMessage(`{"spec":{"nodeSelecter":{}}}`) }), "sandbox.kubernetes.podTemplate: not a pod"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := tt.mutate(sandbox.DefaultConfig())
			err := c.Validate()
			if err == nil || !strings.Contains(err.Error(), tt.wantKey) {
				t.Errorf("Validate = %v, want an error naming %s", err, tt.wantKey)
			}
		})
	}
}

func dk(f func(*docker.Config)) func(sandbox.Config) sandbox.Config {
	return func(c sandbox.Config) sandbox.Config { return docker.With(c, f) }
}

func bw(f func(*bwrap.Config)) func(sandbox.Config) sandbox.Config {
	return func(c sandbox.Config) sandbox.Config { return bwrap.With(c, f) }
}

func kb(f func(*kubernetes.Config)) func(sandbox.Config) sandbox.Config {
	return func(c sandbox.Config) sandbox.Config { return kubernetes.With(c, f) }
}

// FuzzConfigJSON feeds arbitrary "sandbox" objects through decoding, the
// drivers' defaults and validation: nothing may panic, and a config that
// validates keeps each driver's safe defaults where it said nothing.
func FuzzConfigJSON(f *testing.F) {
	f.Add(`{}`)
	f.Add(`{"backend":"docker","docker":{"memory":"1g","readOnlyRoot":false}}`)
	f.Add(`{"scope":"shared","idleTimeout":"1h","bwrap":{"roBind":["/x"]}}`)
	f.Add(`{"kubernetes":{"podTemplate":{"spec":{}},"requests":{"cpu":"1"}}}`)
	f.Fuzz(func(t *testing.T, s string) {
		var c sandbox.Config
		if json.Unmarshal([]byte(s), &c) != nil {
			return
		}
		c = c.WithDefaults()
		if c.Validate() != nil {
			return
		}
		d, k := docker.ConfigOf(c), kubernetes.ConfigOf(c)
		if d.ReadOnlyRoot == nil || d.Network == "" || d.User == "" || c.Scope == "" || k.RunAsUser <= 0 || k.Namespace == "" {
			t.Errorf("defaults missing after WithDefaults: %+v %+v %+v", c, d, k)
		}
	})
}

// fakeBackend is the backend of the fake driver.
type fakeBackend struct{ level int }

func (fakeBackend) Name() string { return "testfake" }
func (f fakeBackend) Exec(_ context.Context, req sandbox.Request) (runner.Result, error) {
	c := runner.NewCapture(8, 0)
	_, _ = c.Stdout().Write([]byte(strings.Repeat("x", 4*f.level) + req.Command))
	return c.Finish(runner.Outcome{}), nil
}
func (fakeBackend) Close(context.Context) error { return nil }

// fakeConfig is the fake driver's own section, "testfake": {"level": N}.
type fakeConfig struct {
	Level int `json:"level,omitempty"`
}

// TestFakeDriver adds a sandbox driver from outside the base package —
// its name, its own config section with defaults and validation, its
// Open and Diagnose — with nothing but sandbox.Register, then configures
// it the way exechost.json does and opens it through the chooser.
func TestFakeDriver(t *testing.T) {
	sandbox.Register(sandbox.Driver{
		Name:    "testfake",
		Summary: "a test driver",
		Config: sandbox.NewSection("testfake", func(c *fakeConfig) {
			if c.Level == 0 {
				c.Level = 2
			}
		}, func(c fakeConfig, _ sandbox.Config) []error {
			if c.Level > 5 {
				return []error{sandbox.KeyError("level", "%d is above 5", c.Level)}
			}
			return nil
		}),
		Open: func(_ context.Context, cfg sandbox.Config, _ string) (sandbox.Backend, error) {
			return fakeBackend{sandbox.SectionOf[fakeConfig](cfg, "testfake").Level}, nil
		},
		Diagnose: func(context.Context, sandbox.Config, string) (sandbox.Found, error) {
			return sandbox.Found{Detail: "always here"}, nil
		},
	})
	parse := func(s string) sandbox.Config {
		var c sandbox.Config
		if err := json.Unmarshal([]byte(s), &c); err != nil {
			t.Fatal(err)
		}
		return c
	}
	if _, err := pick.Open(context.Background(), parse(`{"backend":"testfake","testfake":{"level":9}}`), t.TempDir()); err == nil || !strings.Contains(err.Error(), "sandbox.testfake.level: 9 is above 5") {
		t.Errorf("Open with a bad fake section: %v, want its own validation error", err)
	}
	if _, err := pick.Open(context.Background(), parse(`{"backend":"testfake","testfake":{"levl":1}}`), t.TempDir()); err == nil || !strings.Contains(err.Error(), "sandbox.testfake.levl: unknown key") {
		t.Errorf("Open with a typo in the fake section: %v, want an unknown key", err)
	}
	b, err := pick.Open(context.Background(), parse(`{"backend":"testfake"}`), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	res, err := b.Exec(context.Background(), sandbox.Request{Command: "!"})
	if err != nil {
		t.Fatal(err)
	}
	// Level 2 (the section's default) writes 9 bytes past an 8-byte cap:
	// Capture.Finish reports what it dropped.
	if b.Name() != "testfake" || !res.Truncated || res.DroppedBytes != 1 || !res.Success {
		t.Errorf("fake backend result = %+v, want truncated with 1 byte dropped", res)
	}
	d, err := pick.Diagnose(context.Background(), parse(`{"backend":"testfake"}`), t.TempDir())
	if err != nil || d.Selected != "testfake" {
		t.Errorf("Diagnose = %+v, %v; want the fake driver selected", d, err)
	}
	if _, err := pick.Open(context.Background(), parse(`{"backend":"faux"}`), t.TempDir()); !errors.Is(err, sandbox.ErrUnknownBackend) {
		t.Errorf("an unregistered name: %v, want ErrUnknownBackend", err)
	}
}
