package gateway_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/exechost/exechost/internal/bridge"
)

// BenchmarkExecNodeOutput runs `cat` of an empty, a 100 KB and a 1 MB
// text file through gateway → node in this process, for profiling the
// result path (the empty file's row is the round trip the output adds to;
// B/op is the steadiest figure on a loaded machine):
//
//	go test -run XXX -bench ExecNodeOutput -benchmem -cpuprofile cpu.out ./internal/gateway/
func BenchmarkExecNodeOutput(b *testing.B) {
	for _, size := range []int{0, 100 << 10, 1 << 20} {
		b.Run(fmt.Sprintf("%dKB", size>>10), func(b *testing.B) {
			e := newEnv(b, fullConfig)
			e.addNode(b, "n", policyFull)
			file := filepath.Join(b.TempDir(), "out.txt")
			line := strings.Repeat("0123456789abcdef", 7) + "\n"
			if err := os.WriteFile(file, []byte(strings.Repeat(line, size/len(line)+1)[:size]), 0o600); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(size))
			benchExec(b, e.client(b, bridge.RoleAgent), bridge.ExecParams{Command: "cat " + file, Host: "node"})
		})
	}
}
