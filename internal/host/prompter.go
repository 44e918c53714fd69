package host

import (
	"errors"
)

// errNoPrompter is what NoAnswer reports when no approver is configured.
var errNoPrompter = errors.New("no approver configured")
