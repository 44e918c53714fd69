package cli

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/exechost/exechost/internal/approvals"
	"github.com/exechost/exechost/internal/config"
	"github.com/exechost/exechost/internal/gateway"
	"github.com/exechost/exechost/internal/policy"
	"github.com/exechost/exechost/internal/state"
)

func init() { register(newUpCmd) }

// upConfig is the embedded configuration of `exechost up` when the state
// directory has no exechost.json: commands go to the local node, whose own
// approvals decide; a miss asks the human.
func upConfig(listen string) *config.Config {
	c := config.Default()
	c.Tools.Exec = config.Exec{Host: string(policy.HostNode), Security: string(policy.SecurityAllowlist), Ask: string(policy.AskOnMiss)}
	c.Gateway.Listen = listen
	return c
}

func newUpCmd(g *globals) *cobra.Command {
	var listen, web string
	var noApprover bool
	var lf logFlags
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Quick start: a gateway, a paired local node and the approver web UI, on loopback",
		Long: `Start everything needed to try exechost on one machine, on loopback only:
a gateway (embedded config: host=node, security=allowlist, ask=on-miss,
unless <state>/exechost.json exists), a node runner paired with it
automatically, and the approver (web UI and prompts in this terminal).

A fresh state directory gets an exec-approvals.json with security=allowlist,
ask=on-miss and askFallback=deny: nothing runs until it is allowlisted or
approved. Ctrl-C stops everything.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return g.runUp(ctx, cmd, listen, web, noApprover, lf)
		},
	}
	cmd.Flags().StringVar(&listen, "listen", config.DefaultListen, "gateway listen address (loopback)")
	cmd.Flags().StringVar(&web, "web", "127.0.0.1:18790", "approver web UI address (loopback)")
	cmd.Flags().BoolVar(&noApprover, "no-approver", false, "do not start the approver (askFallback decides)")
	cmd.Flags().StringVar(&lf.format, "log-format", "text", "log format: text or json")
	cmd.Flags().StringVar(&lf.level, "log-level", "warn", "log level: debug, info, warn or error")
	return cmd
}

func (g *globals) runUp(parent context.Context, cmd *cobra.Command, listen, web string, noApprover bool, lf logFlags) error {
	dir, err := g.dir()
	if err != nil {
		return err
	}
	if err := state.Ensure(dir); err != nil {
		return err
	}
	fresh, err := ensureUpApprovals(dir)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(parent)
	defer cancel()

	var wg sync.WaitGroup
	errc := make(chan error, 3)
	ready := make(chan string, 1)
	paired := make(chan string, 1)
	gwc := make(chan *gateway.Gateway, 1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		err := g.runGateway(ctx, "", listen, lf, func(url string, gw *gateway.Gateway) {
			gwc <- gw
			ready <- url
		}, upConfig(listen))
		errc <- gatewayErr(err)
	}()
	var url string
	var gw *gateway.Gateway
	select {
	case url = <-ready:
		gw = <-gwc
	case err := <-errc:
		return err
	case <-ctx.Done():
		wg.Wait()
		return nil
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		// The node is ours, in this process, on loopback: approve it
		// directly instead of asking the user to.
		err := g.runNode(ctx, nodeRunFlags{url: url, log: lf}, func(id string) {
			actx, acancel := context.WithTimeout(ctx, 10*time.Second)
			defer acancel()
			// The node hears "pending" as the gateway files it; retry
			// briefly until the gateway lists it.
			var err error
			for range 100 {
				if _, err = gw.Approve(actx, id); err == nil || actx.Err() != nil {
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
			if err != nil {
				fmt.Fprintf(g.stderr, "exechost: auto-pairing the local node failed: %v\n", err)
				return
			}
			select {
			case paired <- id:
			default:
			}
		})
		if err != nil {
			errc <- fmt.Errorf("local node: %w", err)
		}
	}()
	if !noApprover {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := runApprover(ctx, g, cmd.InOrStdin(), web, false, ""); err != nil && ctx.Err() == nil {
				errc <- fmt.Errorf("approver: %w", err)
			}
		}()
	}
	var nodeID string
	select {
	case nodeID = <-paired:
	case err := <-errc:
		cancel()
		wg.Wait()
		return err
	case <-time.After(30 * time.Second):
		cancel()
		wg.Wait()
		return errors.New("the local node did not pair within 30s (hint: rerun with --log-level info)")
	case <-ctx.Done():
		wg.Wait()
		return nil
	}
	printUpNext(g, dir, url, web, nodeID, fresh, noApprover)
	select {
	case err = <-errc:
	case <-ctx.Done():
	}
	cancel()
	wg.Wait()
	fmt.Fprintln(g.stdout, "exechost: stopped")
	return err
}

func gatewayErr(err error) error {
	if err != nil {
		return fmt.Errorf("gateway: %w", err)
	}
	return nil
}

// ensureUpApprovals creates exec-approvals.json for a fresh state directory
// with allowlist + ask on miss + askFallback deny. An existing file is never
// touched.
func ensureUpApprovals(dir string) (created bool, err error) {
	s := approvals.NewStore(dir)
	if _, err := os.Lstat(s.Path); err == nil {
		return false, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return false, err
	}
	_, err = s.Update(func(f *approvals.File) error {
		f.Defaults.Security = string(policy.SecurityAllowlist)
		f.Defaults.Ask = string(policy.AskOnMiss)
		f.Defaults.AskFallback = string(policy.FallbackDeny)
		return nil
	})
	return err == nil, err
}

func printUpNext(g *globals, dir, url, web, nodeID string, fresh, noApprover bool) {
	w := g.stdout
	fmt.Fprintf(w, "exechost is up (Ctrl-C stops everything)\n")
	fmt.Fprintf(w, "  gateway   %s   (token in %s)\n", url, gateway.TokenPath(dir))
	fmt.Fprintf(w, "  node      %s   (paired, this machine)\n", nodeID)
	if !noApprover {
		where := "http://" + web
		if strings.HasSuffix(web, ":0") {
			where = "the web UI address printed above"
		}
		fmt.Fprintf(w, "  approver  %s   (prompts also appear here; answer \"ID allow-once\")\n", where)
	}
	if fresh {
		fmt.Fprintf(w, "  policy    %s created: security=allowlist ask=on-miss askFallback=deny\n", approvals.DefaultPath(dir))
	}
	sd := ""
	if dir != "" {
		sd = " --state-dir " + dir
	}
	fmt.Fprintf(w, "\nNext, in another terminal:\n")
	fmt.Fprintf(w, "  exechost%s exec --gateway %s 'uname -a'              # asks the approver, then runs on the node\n", sd, url)
	fmt.Fprintf(w, "  exechost%s approvals allowlist add /usr/bin/uname     # never ask for it again\n", sd)
	fmt.Fprintf(w, "  exechost%s nodes list --gateway %s\n", sd, url)
	fmt.Fprintf(w, "  exechost%s approvals get\n", sd)
}
