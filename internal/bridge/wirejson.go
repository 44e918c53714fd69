package bridge

import (
	"reflect"

	jsonv2 "github.com/go-json-experiment/json"
	jsonv1 "github.com/go-json-experiment/json/v1"
)

// Unmarshal is the one decoder of JSON that crosses the wire: frames,
// params and payloads, in the bridge and in every peer (gateway, node).
// It is go-json-experiment's v1 package, the implementation encoding/json
// becomes under GOEXPERIMENT=jsonv2: encoding/json's semantics (duplicate
// keys: the last wins; field names match case-insensitively; invalid UTF-8
// is replaced) with a scanner several times faster. Speed matters here
// because a command's whole output is decoded on its way (a node's result
// frame, then its payload); `go run ./bench` has the rows. One decoder for
// every peer also means no two of them can read the same bytes two ways.
// The one exception is the text of a command's output, the wire's one
// large string: unquoteFast (passthrough.go) unquotes it after Unmarshal's
// decoder has checked it, and declines whatever it would not read the
// same way (FuzzUnquoteFast). Files on disk keep encoding/json.
func Unmarshal(data []byte, v any) error { return jsonv1.Unmarshal(data, v) }

// UnmarshalOwn is Unmarshal for the bridge's own wire types, on the paths
// a command's output takes (frames, system.run results, node events, exec
// results): the same reading of the same bytes, without v1's legacy
// errors. With those, v1 first scans the whole value only to be able to
// report a syntax error in v1's form, then decodes it: every output
// string crossed the scanner once more per hop. The input is still
// checked whole; errors are v2's types (nothing reads a wire error's
// type), and a value whose decode failed is not used. v2 refuses, at run
// time, struct types v1's legacy mode tolerates (JSON names that clash,
// bad tags, no exported field): TestWireTypesDecode tries every struct
// type of this package, so UnmarshalOwn is only for those.
func UnmarshalOwn(data []byte, v any) error { return jsonv2.Unmarshal(data, v, wireDecode) }

// ownPkg is this package's path: the types UnmarshalOwn is for.
var ownPkg = reflect.TypeFor[Frame]().PkgPath()

// wireDecode is v1's defaults but for its legacy errors.
var wireDecode = jsonv2.JoinOptions(jsonv1.DefaultOptionsV1(), jsonv1.ReportErrorsWithLegacySemantics(false))

// Marshal is the one encoder of JSON that crosses the wire, the peer of
// Unmarshal: the same package, so encoding/json's output (HTML-safe
// escaping, sorted map keys) from a faster string escaper, which is what a
// command's output costs on every hop. A system.run result's output is
// escaped by appendQuoted (quote.go) instead, held to Marshal's bytes by
// FuzzAppendQuoted and FuzzResultWire.
func Marshal(v any) ([]byte, error) { return jsonv1.Marshal(v) }
