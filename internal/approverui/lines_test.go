package approverui

import (
	"context"
	"io"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/exechost/exechost/internal/prompt"
	"github.com/exechost/exechost/internal/testproc"

	"github.com/exechost/exechost/internal/policy"
)

// syncBuffer is a bytes.Buffer safe for one writer and a polling reader.
type syncBuffer = testproc.Buffer

// waitFor polls out until re matches and returns the submatches (the
// deadline only stops a hung test).
func waitFor(t *testing.T, out *syncBuffer, re string) []string {
	t.Helper()
	rx := regexp.MustCompile(re)
	deadline := time.Now().Add(20 * time.Second)
	for {
		if m := rx.FindStringSubmatch(out.String()); m != nil {
			return m
		}
		if time.Now().After(deadline) {
			t.Fatalf("output never matched %q:\n%s", re, out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestRunLines(t *testing.T) {
	b := prompt.NewBroker()
	pr, pw := io.Pipe()
	defer pw.Close()
	out := &syncBuffer{}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go RunLines(ctx, b, pr, out, "approver lines")

	type res struct {
		a  policy.Approval
		by string
	}
	ask := func(id string, r prompt.Request) <-chan res {
		ch := make(chan res, 1)
		go func() {
			a, by, _ := b.Submit(ctx, prompt.Pending{ID: id, Request: r, ExpiresAt: time.Now().Add(time.Hour)})
			ch <- res{a, by}
		}()
		return ch
	}
	r1 := ask("aaaa1111", sampleRequest)
	m := waitFor(t, out, `(?s)PENDING aaaa1111\n.*command:  ls -la\n.*resolved: /usr/bin/ls \(not allowlisted\)\n.*answer:   aaaa1111 (\S+)\n`)
	if m[1] != "allow-once|allow-always|deny" {
		t.Errorf("choices %q", m[1])
	}
	noAlways := sampleRequest
	noAlways.Choices = []string{"allow-once", "deny"}
	r2 := ask("aaaa2222", noAlways)
	waitFor(t, out, `answer:   aaaa2222 allow-once\|deny\n`)

	for _, line := range []string{"aaaa allow-once", "zzzz deny", "aaaa2222 allow-always", "aaaa1111 maybe", "just-one-word"} {
		io.WriteString(pw, line+"\n")
	}
	waitFor(t, out, `error: resolve aaaa: ambiguous approval id`)
	waitFor(t, out, `error: resolve zzzz: unknown approval id`)
	waitFor(t, out, `error: resolve aaaa2222: decision not offered`)
	waitFor(t, out, `error: invalid value: decision "maybe"`)
	waitFor(t, out, `error: want "ID allow-once\|allow-always\|deny"`)

	io.WriteString(pw, "aaaa1 allow-always\naaaa2222 deny\n")
	if r := testproc.Recv(t, r1, "the first prompt's answer"); r.a != policy.AllowAlways || r.by != "approver lines" {
		t.Errorf("aaaa1111 = %+v", r)
	}
	if r := testproc.Recv(t, r2, "the second prompt's answer"); r.a != policy.Reject {
		t.Errorf("aaaa2222 = %+v", r)
	}
	waitFor(t, out, "RESOLVED aaaa1111 allow-always by approver lines\n")
	waitFor(t, out, "RESOLVED aaaa2222 deny by approver lines\n")

	io.WriteString(pw, "aaaa1111 deny\n")
	waitFor(t, out, "error: resolve aaaa1111: approval already answered")

	ectx, ecancel := context.WithCancel(ctx)
	go b.Submit(ectx, prompt.Pending{ID: "bbbb", Request: sampleRequest})
	waitFor(t, out, "PENDING bbbb")
	ecancel()
	waitFor(t, out, "EXPIRED bbbb\n")
	if strings.Count(out.String(), "PENDING") != 3 {
		t.Errorf("output:\n%s", out)
	}
}

var sampleRequest = prompt.Request{
	Command: "ls -la", Argv: []string{"ls", "-la"}, Cwd: "/tmp", Host: "gateway",
	Security: "allowlist", Ask: "on-miss", AgentID: "main", SessionKey: "s1",
	ResolvedPaths: []string{"/usr/bin/ls"}, Allowlisted: []bool{false}, Reason: "allowlist-miss",
}

// TestNodeLabel: a prompt names a key-derived node id by its first 8
// digits (which --node selects), never all 64; a name stays whole.
func TestNodeLabel(t *testing.T) {
	id := strings.Repeat("3f2a9c01", 8)
	for in, want := range map[string]string{id: "3f2a9c01…", "build-box": "build-box", "": ""} {
		if got := NodeLabel(in); got != want {
			t.Errorf("NodeLabel(%q) = %q, want %q", in, got, want)
		}
	}
	if got := nodeSuffix(id); got != " (node 3f2a9c01…)" {
		t.Errorf("nodeSuffix = %q", got)
	}
}
