package openclaw

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/exechost/exechost/internal/approvals"
	"github.com/exechost/exechost/internal/host"
	"github.com/exechost/exechost/internal/policy"
	"github.com/exechost/exechost/internal/prompt"
)

// Bounds on the plans a node remembers from system.run.prepare, so that a
// gateway approval can be bound to one: a plan is forgotten after
// preparedTTL, the oldest first beyond maxPrepared, and once an approval
// used it.
const (
	maxPrepared = 4096
	preparedTTL = time.Hour
)

// preparedPlan is what this node returned from system.run.prepare for one
// exact request, and the canonical hash of the command tree it analysed:
// the approval the gateway later forwards binds that hash, and the files
// the run depends on (bind.go), which must not change before it runs.
type preparedPlan struct {
	hash  string // shellcmd.Analysis.Hash ("" when nothing could be vouched for)
	cwd   string
	bound []boundFile
	at    time.Time
}

// changedFiles lists the bound files that changed since the plan was
// prepared (nil when none did).
func (p preparedPlan) changedFiles() []string { return changed(p.bound) }

// preparedPlans is the node's table of plans a gateway approval may name.
// Identical requests prepared twice are two plans under one key, taken
// oldest first: each approval is its own run.
type preparedPlans struct {
	mu    sync.Mutex
	plans map[string][]preparedPlan // by planKey, oldest first
	n     int                       // plans held
	order []string                  // one key per plan added, oldest first
}

// planKey is the sha256 of everything a gateway approval must match:
// what runs (argv, the text shown), where (cwd), with what environment,
// for which agent and session.
func planKey(argv []string, cwd, text, agentID, sessionKey string, env map[string]string) string {
	if len(env) == 0 {
		env = nil // no env and {} are the same request
	}
	b, _ := json.Marshal(struct {
		Argv       []string          `json:"argv"`
		Cwd        string            `json:"cwd"`
		Text       string            `json:"text"`
		AgentID    string            `json:"agentId"`
		SessionKey string            `json:"sessionKey"`
		Env        map[string]string `json:"env"` // encoding/json sorts the keys
	}{argv, cwd, text, agentID, sessionKey, env})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func (t *preparedPlans) add(key string, p preparedPlan) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.plans == nil {
		t.plans = map[string][]preparedPlan{}
	}
	t.plans[key] = append(t.plans[key], p)
	t.order = append(t.order, key)
	t.n++
	for t.n > maxPrepared && len(t.order) > 0 {
		// Per key, plans leave oldest first (take and eviction alike), so
		// the oldest order entry of a key stands for its oldest plan.
		k := t.order[0]
		t.order = t.order[1:]
		if l := t.plans[k]; len(l) > 0 {
			t.drop(k, l)
		}
	}
	if len(t.order) > 2*maxPrepared { // mostly consumed plans: compact
		keep := map[string]int{}
		for k, l := range t.plans {
			keep[k] = len(l)
		}
		var order []string
		for i := len(t.order) - 1; i >= 0; i-- {
			if k := t.order[i]; keep[k] > 0 {
				keep[k]--
				order = append(order, k)
			}
		}
		slices.Reverse(order)
		t.order = order
	}
}

// drop forgets the oldest plan of key (l is its list).
func (t *preparedPlans) drop(key string, l []preparedPlan) {
	if len(l) == 1 {
		delete(t.plans, key)
	} else {
		t.plans[key] = l[1:]
	}
	t.n--
}

// take returns and forgets the oldest live plan prepared under key: one
// approval, one run.
func (t *preparedPlans) take(key string, now time.Time) (preparedPlan, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for l := t.plans[key]; len(l) > 0; l = t.plans[key] {
		p := l[0]
		t.drop(key, l)
		if now.Sub(p.at) <= preparedTTL {
			return p, true
		}
	}
	return preparedPlan{}, false
}

// gatewayApproval is an operator's decision OpenClaw's gateway forwarded
// with a system.run, already matched to a plan this node prepared. It
// travels to the prompter in the run's context.
type gatewayApproval struct {
	decision policy.Approval
	plan     preparedPlan
	id       string // OpenClaw's approval record id (the run id it forwards)
}

type approvalKey struct{}

func withGatewayApproval(ctx context.Context, a *gatewayApproval) context.Context {
	return context.WithValue(ctx, approvalKey{}, a)
}

func gatewayApprovalOf(ctx context.Context) *gatewayApproval {
	a, _ := ctx.Value(approvalKey{}).(*gatewayApproval)
	return a
}

// ApprovalPrompter returns the engine's prompter for a node that accepts
// approvals given through the OpenClaw gateway (Options.GatewayApprovals):
// when the run carries a gateway approval bound to the very command tree
// and working directory the engine now asks about, that is the answer
// (allow-always only when the node also allows remote widening, since it
// adds to the allowlist; else it is recorded as allow-once). Anything
// else goes to local (this machine's approver; nil: nobody, so askFallback
// applies).
func (n *Node) ApprovalPrompter(local host.Prompter) host.Prompter {
	return approvalPrompter{n: n, local: local}
}

type approvalPrompter struct {
	n     *Node
	local host.Prompter
}

// Prompt implements host.Prompter.
func (p approvalPrompter) Prompt(ctx context.Context, req prompt.Request) (policy.Approval, string, error) {
	if a := gatewayApprovalOf(ctx); a != nil && p.n.opts.GatewayApprovals &&
		a.plan.hash != "" && req.PlanHash == a.plan.hash && req.Cwd == a.plan.cwd {
		by := fmt.Sprintf("OpenClaw gateway operator (approval %s)", a.id)
		if ch := a.plan.changedFiles(); len(ch) > 0 {
			// Checked again here, right before the run: systemRun's check
			// ran before the analysis.
			return policy.Reject, by + "; refused: " + ErrOperandChanged.Error() + " (" + strings.Join(ch, ", ") + ")", nil
		}
		d := a.decision
		if d == policy.AllowAlways && !p.n.opts.AllowRemoteWidening {
			d = policy.AllowOnce
			by += fmt.Sprintf("; allow-always taken as allow-once: this node does not let its gateway widen its policy (%s)", approvals.RemoteWideningFlag)
		}
		if !prompt.Offered(req, d) {
			d = policy.AllowOnce // ask=always offers no allow-always
		}
		return d, by, nil
	}
	if p.local == nil {
		return "", "", fmt.Errorf("%w: this node takes approvals only through the OpenClaw gateway (--approvals-route gateway)", prompt.ErrUnreachable)
	}
	return p.local.Prompt(ctx, req)
}

var _ host.Prompter = approvalPrompter{}
