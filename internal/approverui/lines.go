package approverui

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/exechost/exechost/internal/policy"
	"github.com/exechost/exechost/internal/prompt"
	"github.com/exechost/exechost/internal/textsafe"
)

// RunLines is the approver's plain line mode, for terminals without a TUI
// and for scripts: it prints each prompt (a "PENDING <id>" line followed by
// indented details), "RESOLVED <id> <decision> by <who>" and
// "EXPIRED <id>", and reads answers from in as lines "ID DECISION" (ID may
// be a unique prefix; "list" reprints the queue). It returns when ctx is
// done; a closed input only stops answering.
func RunLines(ctx context.Context, b *prompt.Broker, in io.Reader, out io.Writer, by string) {
	var mu sync.Mutex
	printf := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(out, format, args...)
	}
	show := func(p prompt.Pending) {
		var sb strings.Builder
		fmt.Fprintf(&sb, "PENDING %s\n", p.ID)
		for _, f := range Describe(p, time.Now()) {
			fmt.Fprintf(&sb, "  %-9s %s\n", f.Label+":", f.Value)
		}
		fmt.Fprintf(&sb, "  answer:   %s %s\n", p.ID, strings.Join(prompt.Choices(p.Request), "|"))
		printf("%s", sb.String())
	}

	list, ch, stop := b.Watch()
	defer stop()
	for _, p := range list {
		show(p)
	}

	go func() {
		sc := bufio.NewScanner(in)
		for sc.Scan() {
			line := strings.TrimSpace(sc.Text())
			switch {
			case line == "":
				continue
			case line == "list":
				ps := b.List()
				if len(ps) == 0 {
					printf("no pending prompts\n")
				}
				for _, p := range ps {
					show(p)
				}
				continue
			}
			fields := strings.Fields(line)
			if len(fields) != 2 {
				printf("error: want \"ID allow-once|allow-always|deny\", got %q\n", textsafe.Line(line))
				continue
			}
			a, err := policy.ParseApproval(fields[1])
			if err == nil {
				err = b.Resolve(fields[0], a, by)
			}
			if err != nil {
				printf("error: %v\n", err)
			}
		}
		if ctx.Err() == nil {
			printf("input closed; prompts can no longer be answered here\n")
		}
	}()

	for {
		select {
		case <-ctx.Done():
			return
		case c, ok := <-ch:
			if !ok {
				return
			}
			switch c.Kind {
			case prompt.ChangeAdded:
				show(c.Pending)
			case prompt.ChangeResolved:
				printf("RESOLVED %s %s by %s\n", c.Pending.ID, c.Decision, textsafe.Line(c.By))
			case prompt.ChangeExpired:
				printf("EXPIRED %s\n", c.Pending.ID)
			}
		}
	}
}
