package prompt

import "errors"

// Sentinel errors of a prompter (the approval socket's client, the
// approver's in-process queue, a route). Each means "no answer from a human":
// the execution host applies askFallback and puts the error's message into
// the decision's reason, so the message says which case happened.
var (
	// ErrUnreachable: no approver is listening on the socket (absent,
	// crashed, or the socket path is wrong), or what answers does not
	// greet with a hello of this protocol. Nothing was sent.
	ErrUnreachable = errors.New("approver unreachable")
	// ErrTimeout: the approver did not answer within the prompt timeout.
	ErrTimeout = errors.New("approver timed out")
	// ErrBadReply: the approver's reply could not be verified (bad hmac,
	// wrong id, malformed frame, a decision that was not offered) or the
	// connection closed before a decision arrived.
	ErrBadReply = errors.New("approver reply unverifiable")
	// ErrRefused: the approver refused the request with an error frame
	// (invalid-auth, expired, replay, too-large, rate-limited, bad-request).
	ErrRefused = errors.New("approver refused the request")
)

// Sentinel errors of the Broker, for UIs that resolve prompts.
var (
	// ErrUnknownID: no pending prompt has this id or prefix.
	ErrUnknownID = errors.New("unknown approval id")
	// ErrAmbiguousID: a prefix matches several pending prompts.
	ErrAmbiguousID = errors.New("ambiguous approval id")
	// ErrExpired: the prompt existed but expired (the execution host gave
	// up and applied askFallback) or was already answered.
	ErrExpired = errors.New("approval expired")
	// ErrAnswered: the prompt was already answered.
	ErrAnswered = errors.New("approval already answered")
	// ErrNotOffered: the decision is not among the prompt's choices (for
	// example allow-always when ask=always).
	ErrNotOffered = errors.New("decision not offered for this prompt")
	// ErrDuplicateID: a prompt with this id is already pending.
	ErrDuplicateID = errors.New("duplicate approval id")
)
