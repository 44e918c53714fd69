package gateway

import (
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/exechost/exechost/internal/approvalroute"
	"github.com/exechost/exechost/internal/audit"
	"github.com/exechost/exechost/internal/bridge"
)

// methodSources are the packages that declare wire method names; every
// constant named Method* in them must have a row in wantRoles.
var methodSources = []string{"../bridge", "../approvalroute"}

// wantRoles is who may call each method, written out independently of
// methodTable. nil: not a method of an established connection.
var wantRoles = map[string][]string{
	bridge.MethodConnect: nil, // the handshake, answered in connect.go

	bridge.MethodExec:           {bridge.RoleAgent, bridge.RoleOperator},
	bridge.MethodExecStatus:     {bridge.RoleAgent, bridge.RoleOperator},
	bridge.MethodSessionEvents:  {bridge.RoleAgent, bridge.RoleOperator},
	bridge.MethodSessionCommand: {bridge.RoleAgent, bridge.RoleOperator},
	bridge.MethodNodesList:      {bridge.RoleAgent, bridge.RoleOperator},

	bridge.MethodNodesPending:    {bridge.RoleOperator},
	bridge.MethodNodesApprove:    {bridge.RoleOperator},
	bridge.MethodNodesReject:     {bridge.RoleOperator},
	bridge.MethodNodesRemove:     {bridge.RoleOperator},
	bridge.MethodJoinKey:         {bridge.RoleOperator},
	bridge.MethodNodeApprovalGet: {bridge.RoleOperator},
	bridge.MethodNodeApprovalSet: {bridge.RoleOperator},
	approvalroute.MethodPending:  {bridge.RoleOperator},
	approvalroute.MethodResolve:  {bridge.RoleOperator},

	bridge.MethodInvokeResult:       {bridge.RoleNode},
	bridge.MethodNodeEvent:          {bridge.RoleNode},
	approvalroute.MethodNodeRequest: {bridge.RoleNode},
	approvalroute.MethodNodeCancel:  {bridge.RoleNode},
}

// declaredMethods reads every string constant named Method* in dir's
// non-test Go files: name → value.
func declaredMethods(t *testing.T, dir string) map[string]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no Go files in %s (moved? update methodSources): %v", dir, err)
	}
	out := map[string]string{}
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		af, err := parser.ParseFile(fset, f, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range af.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, n := range vs.Names {
					if !strings.HasPrefix(n.Name, "Method") {
						continue
					}
					lit, ok := vs.Values[i].(*ast.BasicLit)
					if !ok || lit.Kind != token.STRING {
						t.Fatalf("%s: %s is not a string literal; extend declaredMethods", f, n.Name)
					}
					v, err := strconv.Unquote(lit.Value)
					if err != nil {
						t.Fatal(err)
					}
					out[dir+"."+n.Name] = v
				}
			}
		}
	}
	return out
}

// TestMethodTable walks every method constant and checks its row: a new
// method without a row, or a row granting other roles than wantRoles
// says, fails here.
func TestMethodTable(t *testing.T) {
	declared := map[string]bool{}
	for _, dir := range methodSources {
		for name, v := range declaredMethods(t, dir) {
			declared[v] = true
			want, known := wantRoles[v]
			if !known {
				t.Errorf("%s = %q has no entry in wantRoles: decide who may call it and add a row to methodTable", name, v)
				continue
			}
			row, inTable := methodTable[v]
			if want == nil {
				if inTable {
					t.Errorf("%s = %q has a row in methodTable but is not a connection method", name, v)
				}
				continue
			}
			got := slices.Sorted(maps.Keys(row.roles))
			if !slices.Equal(got, slices.Sorted(slices.Values(want))) {
				t.Errorf("%s = %q: roles %v, want %v", name, v, got, want)
			}
			for r, h := range row.roles {
				if h == nil {
					t.Errorf("%s: role %s has no handler", v, r)
				}
			}
		}
	}
	for m := range methodTable {
		if !declared[m] {
			t.Errorf("methodTable row %q is not a declared method constant", m)
		}
	}
	if len(declared) < len(wantRoles) {
		t.Errorf("wantRoles has %d entries, only %d declared methods found", len(wantRoles), len(declared))
	}
}

// TestDispatchRefusesOutsideRoles calls every method as every role it
// does not allow: each is FORBIDDEN before any handler runs (a nil node
// connection would panic in a node handler), naming the roles, and is
// recorded; an unknown method is NOT_FOUND.
func TestDispatchRefusesOutsideRoles(t *testing.T) {
	rec := &memRecorder{}
	g := newAuditedGateway(t, rec)
	ctx := context.Background()
	for method, row := range methodTable {
		for _, role := range []string{bridge.RoleAgent, bridge.RoleOperator, bridge.RoleNode, ""} {
			if row.roles[role] != nil {
				continue
			}
			_, err := g.dispatch(ctx, caller{role: role, name: "tester"}, method, []byte(`{}`))
			e := bridge.AsError(err)
			if e.Code != bridge.CodeForbidden || !strings.HasPrefix(e.Message, method+" needs the ") {
				t.Errorf("%s as %q: %v, want FORBIDDEN", method, role, err)
				continue
			}
			r := rec.last(t)
			if r.Action != audit.ActionMethod || r.Event != audit.EventDenied || r.ReasonCode != audit.ReasonForbidden || r.Reason != e.Message {
				t.Errorf("%s as %q: record %+v", method, role, r)
			}
		}
	}
	if _, err := g.dispatch(ctx, caller{role: bridge.RoleOperator}, "no.such.method", nil); bridge.AsError(err).Code != bridge.CodeNotFound {
		t.Errorf("unknown method: %v, want NOT_FOUND", err)
	}
	// Scoped variants: an agent's nodes.list and exec.status are not the
	// operator's.
	for _, m := range []string{bridge.MethodNodesList, bridge.MethodExecStatus} {
		row := methodTable[m]
		if ptr(row.roles[bridge.RoleAgent]) == ptr(row.roles[bridge.RoleOperator]) {
			t.Errorf("%s: the agent gets the operator's handler, want the scoped one", m)
		}
	}
}

// ptr identifies a handler's code.
func ptr(h handler) uintptr { return reflect.ValueOf(h).Pointer() }
