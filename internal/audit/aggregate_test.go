package audit

import (
	"fmt"
	"testing"
	"time"
)

// TestAggregatorBounds: per kind the burst then one per interval, the
// count carried by the next record let through or by Flush; the global
// limit across kinds; a bounded number of kinds. Control: SetOff lets
// every refusal through.
func TestAggregatorBounds(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	a := NewAggregator(AggregatorOptions{Burst: 3, Interval: time.Second, MaxKinds: 4, GlobalRate: 100, GlobalBurst: 100, Now: func() time.Time { return now }})
	allowed := 0
	for i := range 10 {
		if ok, _, _ := a.Allow("agent a|miss", Record{Command: fmt.Sprint(i)}); ok {
			allowed++
		}
	}
	if allowed != 3 {
		t.Fatalf("allowed %d of 10 with burst 3", allowed)
	}
	now = now.Add(time.Second)
	ok, same, _ := a.Allow("agent a|miss", Record{})
	if !ok || same != 7 {
		t.Fatalf("after an interval: ok=%v same=%d, want the next record carrying 7", ok, same)
	}
	for range 4 {
		a.Allow("agent a|miss", Record{Command: "last"})
	}
	p := a.Flush()
	if len(p) != 1 || p[0].Count != 4 || p[0].Record.Command != "last" || p[0].Kind != "agent a|miss" {
		t.Fatalf("flush = %+v, want one kind counting 4 with the last record", p)
	}
	if p := a.Flush(); len(p) != 0 {
		t.Fatalf("a second flush = %+v, want nothing", p)
	}
	// Kinds beyond MaxKinds count against the global limit only.
	for i := range 4 {
		a.Allow(fmt.Sprintf("agent k%d|miss", i), Record{})
	}
	if ok, _, _ := a.Allow("agent new|miss", Record{}); ok {
		t.Fatal("a kind beyond MaxKinds was recorded while every tracked kind is busy")
	}
	// The global limit.
	g := NewAggregator(AggregatorOptions{Burst: 100, GlobalRate: 1, GlobalBurst: 2, Now: func() time.Time { return now }})
	n := 0
	for i := range 10 {
		if ok, _, _ := g.Allow(fmt.Sprintf("agent %d|miss", i), Record{}); ok {
			n++
		}
	}
	if n != 2 {
		t.Fatalf("global burst 2 let %d through", n)
	}
	now = now.Add(time.Second)
	if ok, _, others := g.Allow("agent x|miss", Record{}); !ok || others != 8 {
		t.Fatalf("after a second: ok=%v others=%d, want 8 left out by the global limit", ok, others)
	}
	// Control.
	a.SetOff(true)
	for range 50 {
		if ok, _, _ := a.Allow("agent a|miss", Record{}); !ok {
			t.Fatal("control: with aggregation off a refusal was left out")
		}
	}
}
