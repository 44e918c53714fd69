package bridge

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	jsonv2 "github.com/go-json-experiment/json"
)

// wireTypes are the bridge's struct types that cross the wire; notWire
// are its other struct types.
var (
	wireTypes = []any{
		ApprovalsGetResult{}, ApprovalsSetParams{}, Auth{}, ClientAuth{}, ClientInfo{}, ConnectChallenge{},
		ConnectParams{}, ConnectResult{}, CredentialFile{}, Denial{}, DenialSource{}, DeviceAuth{}, Error{},
		ExecEvent{}, ExecParams{}, ExecResult{}, ExecStatusParams{}, ExecStatusResult{}, Frame{}, InvokeCancel{},
		InvokeRequest{}, InvokeResult{}, JoinKeyParams{}, JoinKeyResult{}, NodeApprovalsParams{}, NodeEvent{},
		NodeIDParams{}, NodeInfo{}, NodeView{}, NodesResult{}, PairApproved{}, SessionCommandParams{},
		SessionCommandResult{}, SessionEventsResult{}, SessionParams{}, SessionSettings{}, SystemEvent{},
		SystemRunParams{}, SystemRunResult{}, WhichParams{}, WhichResult{}, execResultIn{}, runResultIn{},
	}
	// decodeOnly are read, never written (their text fields only decode).
	decodeOnly = map[string]bool{"execResultIn": true, "runResultIn": true}
	notWire    = []string{"Channel", "ChannelKey", "CodedError", "Codec", "Conn", "Options", "Transcript", "SendQueue", "frameBatcher", "frameBufPool",
		"outputWire", "pendingCall", "presentInto", "queuedEvent", "response", "wireText"}
)

// TestWireTypesDecode: UnmarshalOwn decodes without v1's legacy errors,
// and then v2 refuses at run time a struct whose JSON names clash, whose
// tags are malformed or that has no exported field, which v1 tolerates.
// Every wire type decodes (and encodes) under UnmarshalOwn's options, and
// every struct type of the package is listed, so a new one cannot reach
// the wire untried.
func TestWireTypesDecode(t *testing.T) {
	listed := map[string]bool{}
	for _, n := range notWire {
		listed[n] = true
	}
	for _, v := range wireTypes {
		typ := reflect.TypeOf(v)
		listed[typ.Name()] = true
		p := reflect.New(typ)
		if err := jsonv2.Unmarshal([]byte(`{}`), p.Interface(), wireDecode); err != nil {
			t.Errorf("%s: Unmarshal({}): %v", typ, err)
		}
		if decodeOnly[typ.Name()] {
			continue
		}
		if _, err := jsonv2.Marshal(p.Interface(), wireDecode); err != nil {
			t.Errorf("%s: Marshal under Unmarshal's options: %v", typ, err)
		}
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.TYPE {
				continue
			}
			for _, s := range g.Specs {
				ts := s.(*ast.TypeSpec)
				if _, ok := ts.Type.(*ast.StructType); ok && ts.TypeParams == nil && !listed[ts.Name.Name] {
					t.Errorf("struct type %s (%s) is in neither wireTypes nor notWire", ts.Name.Name, name)
				}
			}
		}
	}
}
