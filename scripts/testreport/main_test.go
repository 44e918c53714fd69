package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestReport(t *testing.T) {
	in := strings.Join([]string{
		`{"Action":"run","Package":"p","Test":"TestOK"}`,
		`{"Action":"output","Package":"p","Test":"TestOK","Output":"=== RUN   TestOK\n"}`,
		`{"Action":"output","Package":"p","Test":"TestOK","Output":"    ok_test.go:1: noise\n"}`,
		`{"Action":"pass","Package":"p","Test":"TestOK","Elapsed":2.5}`,
		`{"Action":"pass","Package":"p","Test":"TestOK/sub","Elapsed":9}`,
		`{"Action":"output","Package":"p","Test":"TestBad","Output":"    bad_test.go:9: boom\n"}`,
		`{"Action":"output","Package":"p","Test":"TestBad","Output":"--- FAIL: TestBad (0.00s)\n"}`,
		`{"Action":"fail","Package":"p","Test":"TestBad","Elapsed":0.25}`,
		`{"Action":"output","Package":"p","Test":"TestDocker","Output":"=== RUN   TestDocker\n"}`,
		`{"Action":"output","Package":"p","Test":"TestDocker","Output":"    d_test.go:3: SKIP: docker: no daemon answers\n"}`,
		`{"Action":"output","Package":"p","Test":"TestDocker","Output":"--- SKIP: TestDocker (0.00s)\n"}`,
		`{"Action":"skip","Package":"p","Test":"TestDocker"}`,
		`{"Action":"output","Package":"p","Output":"FAIL\tp\t0.1s\n"}`,
		`not json: build output`,
		`{"Action":"output","Package":"q","Test":"TestHang","Output":"=== RUN   TestHang\n"}`,
		`{"Action":"output","Package":"q","Test":"TestHang","Output":"panic: test timed out after 1m0s\n"}`,
		`{"Action":"output","Package":"q","Output":"FAIL\tq\t60.0s\n"}`,
		`{"Action":"fail","Package":"q"}`,
	}, "\n")
	var out bytes.Buffer
	skips, times, err := report(strings.NewReader(in), &out)
	if err != nil {
		t.Fatal(err)
	}
	printSlowest(&out, times)
	printSkips(&out, skips)
	want := "    bad_test.go:9: boom\n--- FAIL: TestBad (0.00s)\nFAIL\tp\t0.1s\nnot json: build output\n" +
		"FAIL\tq\t60.0s\n=== q TestHang never finished; its output:\n=== RUN   TestHang\npanic: test timed out after 1m0s\n" +
		"\n=== slowest tests: 2\n    2.5s p TestOK\n    0.2s p TestBad\n" +
		"\n=== skipped tests: 1\nSKIP p TestDocker: d_test.go:3: SKIP: docker: no daemon answers\n"
	if diff := cmp.Diff(want, out.String()); diff != "" {
		t.Errorf("report (-want +got):\n%s", diff)
	}
}
