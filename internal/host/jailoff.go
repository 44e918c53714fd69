//go:build exechost_jail_off

package host

// jailOff is set only in binaries built with the exechost_jail_off tag,
// which the test suite builds to prove the other walls without the jail
// (internal/shellcmd's TestGuardAloneUnderStrace: the guard alone, whose
// trace must not count the jail's own set-up as the run's writes): every
// engine starts as if built with NoJail. No release build has it; it is
// not a flag.
const jailOff = true
