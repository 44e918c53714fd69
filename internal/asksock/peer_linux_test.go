package asksock

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/exechost/exechost/internal/testdep"
)

const helperSocketEnv = "APPROVER_TEST_HELPER_SOCKET"

// TestHelperForeignClient is not a test: TestForeignUIDRefused re-executes
// the test binary as nobody to run it. It prints the first frame the
// approver sends and the outcome of a full, correctly signed prompt.
func TestHelperForeignClient(t *testing.T) {
	path := os.Getenv(helperSocketEnv)
	if path == "" {
		t.Skip("helper process only")
	}
	fmt.Printf("UID %d\n", os.Getuid())
	c, err := net.Dial("unix", path)
	if err != nil {
		fmt.Printf("DIAL-ERROR %v\n", err)
		return
	}
	line, err := readLine(bufio.NewReader(c), MaxFrame)
	fmt.Printf("FRAME %s %v\n", line, err)
	c.Close()
	cl := &Client{SocketPath: path, Token: testToken}
	a, _, err := cl.Prompt(t.Context(), sampleRequest)
	fmt.Printf("PROMPT %q %v\n", a, err)
}

// TestForeignUIDRefused runs a client as another user (nobody) against a
// socket it can reach (the test opens the directory and socket modes after
// Listen) and checks that the approver refuses it on peer credentials
// alone, even with the right token.
func TestForeignUIDRefused(t *testing.T) {
	if os.Getuid() != 0 {
		testdep.Missing(t, "root", "switching to uid nobody needs root")
	}
	setpriv := testdep.Binary(t, "setpriv")
	ts := startServer(t, nil)
	dir := filepath.Dir(ts.Path)
	bin := filepath.Join(dir, "approver.test")
	copyFile(t, os.Args[0], bin)
	for p, mode := range map[string]os.FileMode{dir: 0o711, ts.Path: 0o777, bin: 0o755} {
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", bin, "-test.run=^TestHelperForeignClient$", "-test.v")
	cmd.Env = append(os.Environ(), helperSocketEnv+"="+ts.Path)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("helper as nobody: %v\n%s", err, out)
	}
	got := string(out)
	for _, want := range []string{"UID 65534", `FRAME {"type":"error","code":"invalid-auth"`, "PROMPT \"\" approver refused the request: invalid-auth"} {
		if !strings.Contains(got, want) {
			t.Errorf("helper output lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, `"hello"`) {
		t.Errorf("a foreign peer got a hello:\n%s", got)
	}
	ts.stop()
	if ids := ts.added(); len(ids) != 0 {
		t.Errorf("foreign peer's prompts were queued: %v", ids)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	src, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
}
