package confine

// Layer names one wall of a run's jail, as the audit record, prompts,
// `approvals check` and `doctor` name it. Each layer is tested alone, the
// others switched off.
type Layer string

// Layers of the jail.
const (
	// LayerLandlock: Landlock rules on file access, TCP and scoping.
	LayerLandlock Layer = "landlock"
	// LayerView: a mount namespace whose view of the machine is made from
	// the policy (read-only everywhere, writable roots, hidden paths and
	// socket directories absent, a private /tmp).
	LayerView Layer = "view"
	// LayerNetwork: a network namespace with only a loopback of its own
	// (network none).
	LayerNetwork Layer = "network"
	// LayerPID: a pid namespace; no process outside the run is visible or
	// signallable.
	LayerPID Layer = "pid"
	// LayerNoPrivilege: empty capability sets and bounding set,
	// no_new_privs.
	LayerNoPrivilege Layer = "no-privilege"
	// LayerSeccomp: a seccomp filter refusing what no agent command needs.
	LayerSeccomp Layer = "seccomp"
	// LayerLimits: a per-run process and memory bound.
	LayerLimits Layer = "limits"
)
