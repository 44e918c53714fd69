package cli

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/exechost/exechost/internal/approvalroute"
	"github.com/exechost/exechost/internal/asksock"
	"github.com/exechost/exechost/internal/host"
	"github.com/exechost/exechost/internal/openclaw"
	"github.com/exechost/exechost/internal/policy"
	"github.com/exechost/exechost/internal/service"
)

// openclawFlags are `exechost node run`'s flags for serving an OpenClaw
// gateway instead of an exechost one (docs/openclaw.md).
type openclawFlags struct {
	url, token, instanceID string
	tokenFile              string // --openclaw-token-file: the token off argv
}

func (f *openclawFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.url, "openclaw", "", "serve an OpenClaw gateway (protocol v4) at this URL, e.g. ws://127.0.0.1:18789, instead of an exechost gateway")
	cmd.Flags().StringVar(&f.token, "openclaw-token", "", "removed: use --openclaw-token-file or $OPENCLAW_GATEWAY_TOKEN")
	_ = cmd.Flags().MarkHidden("openclaw-token") // removed (argv is public): its use gets the fix
	cmd.Flags().StringVar(&f.tokenFile, "openclaw-token-file", "", "read the OpenClaw gateway's shared token from `FILE` (\"-\": stdin; default $OPENCLAW_GATEWAY_TOKEN, else the device token saved at pairing)")
	cmd.Flags().StringVar(&f.instanceID, "openclaw-instance-id", "", "client instance id shown by OpenClaw (default the host name)")
}

// runOpenClawNode serves an OpenClaw gateway with this machine's engine
// until ctx ends.
func (g *globals) runOpenClawNode(ctx context.Context, f nodeRunFlags) error {
	if f.url != "" || f.joinKey != "" || f.joinKeyFile != "" || f.execHost != "local" {
		return usagef("--openclaw cannot be combined with --gateway, --join-key or --exec-host")
	}
	if f.openclaw.token != "" { // refused before anything is created
		_, err := g.secretArg("OpenClaw token", f.openclaw.token, "--openclaw-token", "", "OPENCLAW_GATEWAY_TOKEN")
		return err
	}
	log, err := f.log.logger(g)
	if err != nil {
		return err
	}
	dir, err := g.dir()
	if err != nil {
		return err
	}
	if err := f.check(); err != nil {
		return err
	}
	eng, err := host.New(host.Options{
		StateDir: dir, Host: policy.HostNode, PromptTimeout: f.route.promptTimeout, Audit: g.auditRecorder(dir), CloseAudit: true, SweepRunTemps: true,
		Prompter: asksock.LocalPrompter(dir), WarmInterpreters: f.log.warmInterpreters,
		Warn: func(err error) { log.Warn("process reaper unavailable", "err", err) },
	})
	if err != nil {
		return err
	}
	defer eng.Close()
	token, err := g.secretArg("OpenClaw token", f.openclaw.token, "--openclaw-token", f.openclaw.tokenFile, "OPENCLAW_GATEWAY_TOKEN")
	if err != nil {
		return err
	}
	// --approvals-route gateway|both: accept an operator's approval the
	// OpenClaw gateway forwards, bound to the plan this node prepared;
	// gateway alone asks nobody here.
	route := approvalroute.Route(f.route.route)
	n, err := openclaw.New(openclaw.Options{
		GatewayURL: f.openclaw.url, Token: token, TLSFingerprint: f.fingerprint, StateDir: dir,
		DisplayName: f.displayName, InstanceID: f.openclaw.instanceID,
		Version: Version, Runner: openclaw.EngineRunner(eng), Logger: log, Stderr: g.stderr,
		OnConnected: func() { _ = service.NotifyReady() }, MaxInvokes: f.limits.maxRuns,
		AllowRemoteWidening: f.allowRemoteWidening, ConfirmWidening: asksock.LocalPrompter(dir).Prompt,
		GatewayApprovals: route == approvalroute.Gateway || route == approvalroute.Both,
	})
	if err != nil {
		return err
	}
	// The device id and event sink exist only once the OpenClaw node
	// does, and it needs the engine first; nothing runs before Run.
	eng.NodeID, eng.OnEvent = n.DeviceID(), n.HostEvent
	if route == approvalroute.Gateway {
		eng.Prompter = n.ApprovalPrompter(nil)
	} else {
		eng.Prompter = n.ApprovalPrompter(eng.Prompter)
	}
	log.Info("openclaw node starting", "device", n.DeviceID(), "gateway", f.openclaw.url, "state", dir)
	err = n.Run(ctx)
	_ = service.NotifyStopping()
	return err
}
