package web

import (
	"context"
	"errors"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/go-cmp/cmp"

	"github.com/exechost/exechost/internal/approvals"
	"github.com/exechost/exechost/internal/policy"
	"github.com/exechost/exechost/internal/prompt"
	"github.com/exechost/exechost/internal/testdep"
)

// browser starts a real headless Chromium (Debian's chromium) with a fresh
// profile and returns a tab context. Every wait in the tests is bounded by
// the context's deadline, which only turns a hang into a failure.
func browser(t *testing.T) context.Context {
	t.Helper()
	bin := testdep.Binary(t, "chromium")
	profile := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	actx, acancel := chromedp.NewExecAllocator(ctx,
		chromedp.ExecPath(bin),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(profile),
		chromedp.WindowSize(1280, 1000),
	)
	t.Cleanup(acancel)
	tctx, tcancel := chromedp.NewContext(actx)
	t.Cleanup(tcancel)
	return tctx
}

// fixture is a running web approver with a real broker and a real
// approvals store in a temporary state directory.
type fixture struct {
	url    string
	broker *prompt.Broker
	store  *approvals.Store
}

func startFixture(t *testing.T, gw GatewayBinding) *fixture {
	t.Helper()
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	b := prompt.NewBroker()
	u, err := Start(ctx, Options{Addr: "127.0.0.1:0", Broker: b, StateDir: dir, Gateway: gw, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{url: u, broker: b, store: approvals.NewStore(dir)}
}

// result is what a waiting execution host got back from Submit.
type result struct {
	decision policy.Approval
	by       string
	err      error
}

// submit queues a prompt as the approval socket would and returns where
// its answer arrives, and a cancel that makes the host stop waiting.
func (f *fixture) submit(t *testing.T, id string, req prompt.Request) (<-chan result, context.CancelFunc) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ch := make(chan result, 1)
	now := time.Now()
	go func() {
		a, by, err := f.broker.Submit(ctx, prompt.Pending{ID: id, Request: req, Peer: "uid 1000 pid 4242",
			ReceivedAt: now, ExpiresAt: now.Add(2 * time.Minute)})
		ch <- result{a, by, err}
	}()
	return ch, cancel
}

func (f *fixture) load(t *testing.T) *approvals.File {
	t.Helper()
	file, err := f.store.Load()
	if err != nil {
		t.Fatal(err)
	}
	return file
}

func patterns(file *approvals.File, agent string) []string {
	a := file.Agents[agent]
	if a == nil {
		return nil
	}
	var out []string
	for _, e := range a.Allowlist {
		out = append(out, e.Pattern)
	}
	return out
}

func run(t *testing.T, ctx context.Context, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatal(err)
	}
}

func wait(t *testing.T, ch <-chan result) result {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(time.Minute):
		t.Fatal("Submit did not return after the page answered")
	}
	return result{}
}

// promptReq is a prompt as an execution host sends it.
func promptReq(agent, command string, choices ...string) prompt.Request {
	return prompt.Request{
		Command: command, Argv: strings.Fields(command), Cwd: "/home/dev/project",
		Host: "node", NodeID: "build-box", Security: "allowlist", Ask: "on-miss",
		AgentID: agent, SessionKey: "agent:" + agent + ":main",
		ResolvedPaths: []string{"/usr/bin/git", "/usr/bin/rg"}, Allowlisted: []bool{true, false},
		Reason: policy.ReasonAllowlistMiss, Choices: choices, Fallback: "deny",
	}
}

var allChoices = []string{"allow-once", "allow-always", "deny"}

func TestBrowserDecisions(t *testing.T) {
	ctx := browser(t)
	f := startFixture(t, nil)
	run(t, ctx, chromedp.Navigate(f.url), chromedp.WaitVisible(chromedp.CSS(`body[data-ready="true"]`)))
	before := f.load(t).Hash()

	// The secret left the address bar.
	loc, err := chromedp.Run(ctx, chromedp.Location())
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(loc, SecretParam+"=") {
		t.Errorf("the secret is still in the URL: %s", loc)
	}

	t.Run("allow once", func(t *testing.T) {
		req := promptReq("main", "git status && rg TODO", allChoices...)
		req.Canonical, req.RunsAs = "git status && rg TODO\n", "interpreter"
		req.Executables = []string{"exec /usr/bin/git", "exec /usr/bin/rg"}
		ch, _ := f.submit(t, "p-once-1111", req)
		card := `article[data-id="p-once-1111"]`
		run(t, ctx, chromedp.WaitVisible(chromedp.CSS(card+` button[data-decision="allow-once"]`)))
		text, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(card)))
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"agent main", "git status && rg TODO", "agent:main:main", "node (node build-box)",
			"/home/dev/project", "/usr/bin/git", "/usr/bin/rg", "allowlisted", "not allowlisted", "not in the allowlist", "falls back to deny in ",
			"nothing but the executables below may start", "exec /usr/bin/rg"} {
			if !strings.Contains(text, want) {
				t.Errorf("pending card lacks %q:\n%s", want, text)
			}
		}
		screenshot(t, ctx, "")
		run(t, ctx, chromedp.Click(chromedp.CSS(card+` button[data-decision="allow-once"]`)))
		if r := wait(t, ch); r.err != nil || r.decision != policy.AllowOnce || r.by != "web" {
			t.Fatalf("Submit = %q by %q, %v; want allow-once by web", r.decision, r.by, r.err)
		}
		run(t, ctx, chromedp.WaitNotPresent(chromedp.CSS(card)),
			chromedp.WaitVisible(chromedp.CSS(`#activity li[data-kind="resolved"]`)))
	})

	t.Run("allow always", func(t *testing.T) {
		req := promptReq("main", "rg TODO | find . -name x", allChoices...)
		req.AllowAlways = &prompt.AllowAlwaysPlan{Add: []string{"/usr/bin/rg", "/usr/bin/find"}, Skipped: []string{"sh -c: a shell is never recorded"}}
		ch, _ := f.submit(t, "p-always-2222", req)
		btn := `article[data-id="p-always-2222"] button[data-decision="allow-always"]`
		run(t, ctx, chromedp.WaitVisible(chromedp.CSS(btn)))
		// The card says exactly what allow-always adds and flags find.
		text, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`article[data-id="p-always-2222"] .always`)))
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"adds /usr/bin/rg", "can run anything: --pre", "adds /usr/bin/find", "can run anything: -exec", "not added: sh -c: a shell is never recorded"} {
			if !strings.Contains(text, want) {
				t.Errorf("allow-always list lacks %q:\n%s", want, text)
			}
		}
		run(t, ctx, chromedp.Click(chromedp.CSS(btn)))
		// Persisting the executables is the execution host's job once it
		// has the decision; the approver only answers.
		if r := wait(t, ch); r.err != nil || r.decision != policy.AllowAlways || r.by != "web" {
			t.Fatalf("Submit = %q by %q, %v; want allow-always by web", r.decision, r.by, r.err)
		}
	})

	t.Run("deny, and no allow-always under ask=always", func(t *testing.T) {
		req := promptReq("ops", "rm -rf build", "allow-once", "deny")
		req.Ask, req.Reason = "always", policy.ReasonAskAlways
		ch, _ := f.submit(t, "p-deny-3333", req)
		card := `article[data-id="p-deny-3333"]`
		run(t, ctx, chromedp.WaitVisible(chromedp.CSS(card+` button[data-decision="deny"]`)))
		n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('`+card+` button[data-decision="allow-always"]').length`))
		if err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			t.Errorf("allow-always offered for an ask=always prompt")
		}
		run(t, ctx, chromedp.Click(chromedp.CSS(card+` button[data-decision="deny"]`)))
		if r := wait(t, ch); r.err != nil || r.decision != policy.Reject || r.by != "web" {
			t.Fatalf("Submit = %q by %q, %v; want deny by web", r.decision, r.by, r.err)
		}
	})

	t.Run("command text is shown, never interpreted", func(t *testing.T) {
		cmd := `echo "<img src=x id=pwned onerror=alert(1)>" </pre><b>bold</b>`
		ch, _ := f.submit(t, "p-xss-4444", promptReq("main", cmd, allChoices...))
		card := `article[data-id="p-xss-4444"]`
		run(t, ctx, chromedp.WaitVisible(chromedp.CSS(card+" .cmd")))
		got, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(card+" .cmd")))
		if err != nil {
			t.Fatal(err)
		}
		if got != cmd {
			t.Errorf("command shown as %q, want %q verbatim", got, cmd)
		}
		n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('#pwned, `+card+` b').length`))
		if err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			t.Errorf("command text became HTML elements")
		}
		run(t, ctx, chromedp.Click(chromedp.CSS(card+` button[data-decision="deny"]`)))
		wait(t, ch)
	})

	t.Run("expired prompt leaves the page", func(t *testing.T) {
		ch, stop := f.submit(t, "p-exp-5555", promptReq("main", "make", allChoices...))
		card := `article[data-id="p-exp-5555"]`
		run(t, ctx, chromedp.WaitVisible(chromedp.CSS(card)))
		stop() // the execution host gives up and applies askFallback
		if r := wait(t, ch); !errors.Is(r.err, prompt.ErrExpired) {
			t.Fatalf("Submit after the host gave up = %v, want ErrExpired", r.err)
		}
		run(t, ctx, chromedp.WaitNotPresent(chromedp.CSS(card)),
			chromedp.WaitVisible(chromedp.CSS(`#activity li[data-kind="expired"]`)))
	})

	// Decisions never write the approvals file themselves.
	if after := f.load(t).Hash(); after != before {
		t.Errorf("answering prompts changed exec-approvals.json")
	}
}

func TestBrowserEditor(t *testing.T) {
	ctx := browser(t)
	f := startFixture(t, nil)
	run(t, ctx,
		chromedp.Navigate(f.url),
		chromedp.WaitVisible(chromedp.CSS(`body[data-ready="true"]`)),
		chromedp.Click(chromedp.CSS("#tab-policy")),
		chromedp.WaitVisible(chromedp.CSS("#agent-select")),
	)
	saved := 0
	// waitSaved waits until the page has applied one more successful edit.
	waitSaved := func(t *testing.T) {
		t.Helper()
		saved++
		run(t, ctx, chromedp.WaitReady(chromedp.CSS(`body[data-saved="`+itoa(saved)+`"]`)))
	}

	t.Run("create agent", func(t *testing.T) {
		run(t, ctx, chromedp.SendKeys(chromedp.CSS("#new-agent"), "main"), chromedp.Click(chromedp.CSS("#create-agent")))
		waitSaved(t)
		if f.load(t).Agents["main"] == nil {
			t.Fatal("agent main not in exec-approvals.json after Create entry")
		}
	})

	t.Run("add pattern", func(t *testing.T) {
		run(t, ctx, chromedp.SendKeys(chromedp.CSS("#add-pattern"), "/usr/bin/rg"), chromedp.Click(chromedp.CSS("#add-button")))
		waitSaved(t)
		run(t, ctx, chromedp.WaitVisible(chromedp.CSS(`tr[data-pattern="/usr/bin/rg"]`)))
		if got := patterns(f.load(t), "main"); !slices.Equal(got, []string{"/usr/bin/rg"}) {
			t.Fatalf("allowlist of main = %q, want [/usr/bin/rg]", got)
		}
	})

	t.Run("lint warning shown", func(t *testing.T) {
		run(t, ctx, chromedp.SendKeys(chromedp.CSS("#add-pattern"), "git"), chromedp.Click(chromedp.CSS("#add-button")))
		waitSaved(t)
		text, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`tr[data-pattern="git"] .lint`)))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(text, "matches nothing") {
			t.Errorf("lint for a bare name = %q, want it to say it matches nothing", text)
		}
	})

	t.Run("edit pattern", func(t *testing.T) {
		row := `tr[data-pattern="git"]`
		run(t, ctx,
			chromedp.Click(chromedp.CSS(row+" button.edit")),
			chromedp.SetValue(chromedp.CSS(row+" input.edit-input"), "/usr/bin/git"),
			chromedp.Click(chromedp.CSS(row+" button.save-edit")))
		waitSaved(t)
		run(t, ctx, chromedp.WaitVisible(chromedp.CSS(`tr[data-pattern="/usr/bin/git"]`)))
		if got := patterns(f.load(t), "main"); !slices.Equal(got, []string{"/usr/bin/rg", "/usr/bin/git"}) {
			t.Fatalf("allowlist of main = %q, want [/usr/bin/rg /usr/bin/git]", got)
		}
	})

	t.Run("remove pattern", func(t *testing.T) {
		run(t, ctx, chromedp.Click(chromedp.CSS(`tr[data-pattern="/usr/bin/rg"] button.remove`)))
		waitSaved(t)
		run(t, ctx, chromedp.WaitNotPresent(chromedp.CSS(`tr[data-pattern="/usr/bin/rg"]`)))
		if got := patterns(f.load(t), "main"); !slices.Equal(got, []string{"/usr/bin/git"}) {
			t.Fatalf("allowlist of main = %q, want [/usr/bin/git]", got)
		}
	})

	t.Run("switch ask mode", func(t *testing.T) {
		run(t, ctx, chromedp.SetValue(chromedp.CSS("#sel-ask"), "always"), chromedp.Click(chromedp.CSS("#save-agent")))
		waitSaved(t)
		a := f.load(t).Agents["main"]
		if a == nil || a.Ask != "always" {
			t.Fatalf("agent main = %+v, want ask always", a)
		}
		if got := f.load(t).Resolve("main").Local.Ask; got != policy.AskAlways {
			t.Errorf("effective ask of main = %s, want always", got)
		}
	})

	t.Run("wildcard agent settings", func(t *testing.T) {
		run(t, ctx,
			chromedp.SetValue(chromedp.CSS("#agent-select"), "*"),
			chromedp.Evaluate[chromedp.Void](`document.querySelector("#agent-select").dispatchEvent(new Event("change"))`),
			chromedp.SetValue(chromedp.CSS("#sel-security"), "allowlist"),
			chromedp.SetValue(chromedp.CSS("#sel-fallback"), "allowlist"),
			chromedp.Click(chromedp.CSS("#save-agent")))
		waitSaved(t)
		a := f.load(t).Agents["*"]
		if a == nil || a.Security != "allowlist" || a.AskFallback != "allowlist" {
			t.Fatalf("agent * = %+v, want security allowlist, askFallback allowlist", a)
		}
	})

	t.Run("stale edit refused", func(t *testing.T) {
		// Someone else (the CLI, an allow-always) writes the file after
		// the page loaded it.
		if _, err := f.store.Update(func(file *approvals.File) error {
			file.AddPattern("*", "/bin/true")
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		run(t, ctx, chromedp.SendKeys(chromedp.CSS("#add-pattern"), "/usr/bin/make"), chromedp.Click(chromedp.CSS("#add-button")),
			chromedp.WaitVisible(chromedp.CSS("#banner-reload")))
		text, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("#banner-text")))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(text, "changed underneath") {
			t.Errorf("banner = %q, want it to say the file changed underneath", text)
		}
		file := f.load(t)
		if slices.Contains(patterns(file, "*"), "/usr/bin/make") || !slices.Contains(patterns(file, "*"), "/bin/true") {
			t.Fatalf("after a stale edit, allowlist of * = %q, want the other writer's /bin/true and not /usr/bin/make", patterns(file, "*"))
		}
		// Reload, redo: now it applies.
		run(t, ctx, chromedp.Click(chromedp.CSS("#banner-reload")), chromedp.WaitVisible(chromedp.CSS(`tr[data-pattern="/bin/true"]`)),
			chromedp.Click(chromedp.CSS("#add-button")))
		waitSaved(t)
		if got := patterns(f.load(t), "*"); !slices.Equal(got, []string{"/bin/true", "/usr/bin/make"}) {
			t.Fatalf("allowlist of * after reload = %q, want [/bin/true /usr/bin/make]", got)
		}
	})

	t.Run("last use shown", func(t *testing.T) {
		// The execution host records each use of a pattern; a reload shows it.
		if _, err := f.store.Update(func(file *approvals.File) error {
			file.RecordUse("*", "/usr/bin/make", "make -j8 test", "/usr/bin/make", time.Now())
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		run(t, ctx, chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS(`body[data-ready="true"]`)),
			chromedp.Click(chromedp.CSS("#tab-policy")), chromedp.WaitVisible(chromedp.CSS(`tr[data-pattern="/usr/bin/make"]`)))
		text, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`tr[data-pattern="/usr/bin/make"]`)))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(text, "make -j8 test") || strings.Contains(text, "never") {
			t.Errorf("allowlist row = %q, want the last use shown", text)
		}
		screenshot(t, ctx, "-editor")
	})
}

// screenshot saves the page as PNG when $EXECHOST_WEB_SCREENSHOT names a
// file (suffix goes before ".png"), so a human can check it is legible.
func screenshot(t *testing.T, ctx context.Context, suffix string) {
	t.Helper()
	path := os.Getenv("EXECHOST_WEB_SCREENSHOT")
	if path == "" {
		return
	}
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(strings.TrimSuffix(path, ".png")+suffix+".png", png, 0o600); err != nil {
		t.Fatal(err)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

func TestBrowserNodeBinding(t *testing.T) {
	ctx := browser(t)
	gw := &recordingGateway{bindings: map[string]string{"main": "n-1234567"}}
	f := startFixture(t, gw)
	global := `select[data-agent=""]`
	run(t, ctx,
		chromedp.Navigate(f.url),
		chromedp.WaitVisible(chromedp.CSS(`body[data-ready="true"]`)),
		chromedp.Click(chromedp.CSS("#tab-nodes")),
		chromedp.WaitVisible(chromedp.CSS(global)),
	)
	text, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("#nodes-body")))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text, "build box") || !strings.Contains(text, "connected") {
		t.Errorf("nodes table = %q, want the paired node and its status", text)
	}
	bound, err := chromedp.Run(ctx, chromedp.Value(chromedp.CSS(`select[data-agent="main"]`)))
	if err != nil {
		t.Fatal(err)
	}
	if bound != "n-1234567" {
		t.Errorf("main's binding shown as %q, want n-1234567", bound)
	}
	run(t, ctx,
		chromedp.SetValue(chromedp.CSS(global), "n-1234567"),
		chromedp.Click(chromedp.CSS(`tr:has(`+global+`) button.bind`)),
		chromedp.WaitReady(chromedp.CSS(`body[data-saved="1"]`)),
		chromedp.SetValue(chromedp.CSS(`select[data-agent="main"]`), ""),
		chromedp.Click(chromedp.CSS(`tr:has(select[data-agent="main"]) button.bind`)),
		chromedp.WaitReady(chromedp.CSS(`body[data-saved="2"]`)),
	)
	got, _ := gw.Bindings(ctx)
	if d := cmp.Diff(map[string]string{"": "n-1234567"}, got); d != "" {
		t.Errorf("bindings after binding all agents and unbinding main (-want +got):\n%s", d)
	}
}
