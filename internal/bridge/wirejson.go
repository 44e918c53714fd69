package bridge

import (
	"reflect"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	jsonv1 "github.com/go-json-experiment/json/v1"
)

// Unmarshal is the one decoder of JSON that crosses the wire: frames,
// params and payloads, in the bridge and in every peer (gateway, node).
// It is go-json-experiment's v1 package, the implementation encoding/json
// becomes under GOEXPERIMENT=jsonv2, read strictly: field names match
// exactly (not encoding/json's case-insensitive match), an object with a
// duplicate name is refused (not "the last wins"), and invalid UTF-8 is
// refused. A looser decoder than the check that reads the same bytes lets
// one caller speak as another: `agentid` or a second `agentId` slipped
// past a check on the key `agentId` (docs/threat-model-gateway.md).
// Unknown members are accepted here (a newer peer's answer may carry
// fields this build does not know); requests are read with
// UnmarshalRequest, which refuses them. Speed matters here
// because a command's whole output is decoded on its way (a node's result
// frame, then its payload); `go run ./bench` has the rows. One decoder for
// every peer also means no two of them can read the same bytes two ways.
// The fast paths on a command's output (Codec, codec.go: frames cut by
// their layout, one-pass responses and system.run answers, unquoteFast
// for the output's text) are held to this decoder by one differential
// fuzz harness, FuzzCodec. Files on disk keep encoding/json.
func Unmarshal(data []byte, v any) error { return jsonv2.Unmarshal(data, v, strictV1) }

// UnmarshalRequest is Unmarshal for the params of a request a peer sends:
// on top of Unmarshal's exact names and no duplicates, a member the type
// does not declare is refused, so a misspelt or foreign field ("agentid",
// "AgentId") is an error that names it rather than a value silently
// ignored. FuzzUnmarshalRequest holds it to the typed structs.
func UnmarshalRequest(data []byte, v any) error {
	return jsonv2.Unmarshal(data, v, requestDecode)
}

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

// strictV1 is v1's defaults (what jsonv1.Unmarshal uses) but for its
// case-insensitive names and its tolerance of duplicate names. Invalid
// UTF-8 in a string is still replaced: a command's output may hold it.
var strictV1 = jsonv2.JoinOptions(jsonv1.DefaultOptionsV1(),
	jsonv2.MatchCaseInsensitiveNames(false), jsonv1.MatchCaseSensitiveDelimiter(false),
	jsontext.AllowDuplicateNames(false))

// wireDecode is strictV1 but for its legacy errors.
var wireDecode = jsonv2.JoinOptions(strictV1, jsonv1.ReportErrorsWithLegacySemantics(false))

// requestDecode is strictV1 refusing unknown members and invalid UTF-8
// (no request field carries a command's output).
var requestDecode = jsonv2.JoinOptions(strictV1, jsonv2.RejectUnknownMembers(true), jsontext.AllowInvalidUTF8(false))

// Marshal is the one encoder of JSON that crosses the wire, the peer of
// Unmarshal: the same package, so encoding/json's output (HTML-safe
// escaping, sorted map keys) from a faster string escaper, which is what a
// command's output costs on every hop. A system.run result's output is
// escaped by appendQuoted (quote.go) instead, held to Marshal's bytes by
// FuzzCodec.
func Marshal(v any) ([]byte, error) { return jsonv1.Marshal(v) }
