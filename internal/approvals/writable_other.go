//go:build !unix

package approvals

// writableProblem is not implemented where permissions are ACLs (Windows);
// it reports nothing rather than guessing.
func writableProblem(string) string { return "" }
