package approverui_test

import (
	"testing"
	"time"

	"github.com/exechost/exechost/internal/approverui"
	"github.com/exechost/exechost/internal/prompt"
)

// TestDescribeShowsConfinement: the line mode and the TUI show what the
// kernel will let the run touch.
func TestDescribeShowsConfinement(t *testing.T) {
	fs := approverui.Describe(prompt.Pending{Request: prompt.Request{Command: "ls", Confinement: "writes only in /w; no network (TCP)"}}, time.Now())
	for _, f := range fs {
		if f.Label == "confined" && f.Value == "writes only in /w; no network (TCP)" {
			return
		}
	}
	t.Errorf("no confined field in %+v", fs)
}
