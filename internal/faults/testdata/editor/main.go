// Command editor is the fault suite's concurrent allowlist editor: it adds
// N patterns /opt/TAG/bin/toolI to DIR's exec-approvals.json, one locked
// approvals.Store.Update per pattern, as a separate editing process would.
// TestMain builds it without the race detector, so it runs at full speed
// even under `go test -race`.
//
//	editor DIR TAG N
package main

import (
	"fmt"
	"os"
	"strconv"

	"github.com/exechost/exechost/internal/approvals"
)

func main() {
	if len(os.Args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: editor DIR TAG N")
		os.Exit(2)
	}
	dir, tag := os.Args[1], os.Args[2]
	n, err := strconv.Atoi(os.Args[3])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	s := approvals.NewStore(dir)
	for i := 0; i < n; i++ {
		p := fmt.Sprintf("/opt/%s/bin/tool%d", tag, i)
		if _, err := s.Update(func(f *approvals.File) error { f.AddPattern("*", p); return nil }); err != nil {
			fmt.Fprintf(os.Stderr, "update %s: %v\n", p, err)
			os.Exit(1)
		}
	}
}
