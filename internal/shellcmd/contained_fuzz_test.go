package shellcmd

import (
	"slices"
	"testing"
)

// FuzzAnalyzeContained checks the contained rules against the strict ones
// on any text: the result is well-formed; walls that do not hold change
// nothing; the contained rules accept everything the strict rules accept,
// with the same segments and nothing listed as contained; and a text they
// accept with a substitution or a file redirection says so
// (Analysis.Contained), since only such a text may open files at run time.
func FuzzAnalyzeContained(f *testing.F) {
	fx := newFixture(f)
	seeds := slices.Concat(differentialCorpus, bypassCorpus, []string{
		`cd "$(git rev-parse --show-toplevel)" && make`, `ls $(git ls-files) > out 2>&1`,
		`for f in $(ls); do cat "$f"; done < notes`, `X=$(ls) ls "$X"`, `echo $(ls $(pwd)) >> sub/x`,
		"cat <<EOF > out\n$(ls)\nEOF", `$(ls) x`, `ls > ~/x`, `ls > link/x`, `cd "$(ls)" && ls > x`,
	})
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		strict := Analyze(text, fx.env)
		env := fx.env
		env.Contained = &Contained{WritableRoots: []string{fx.work}} // the jail does not hold
		if off := Analyze(text, env); off.OK != strict.OK || off.Error != strict.Error || len(off.Contained) > 0 {
			t.Fatalf("%q: walls that do not hold changed the analysis: strict %v %q, got %v %q %v", text, strict.OK, strict.Error, off.OK, off.Error, off.Contained)
		}
		env.Contained = containedFor(fx)
		c := Analyze(text, env)
		checkInvariants(t, "Analyze (contained)", c)
		if strict.OK {
			if !c.OK || len(c.Contained) > 0 || !slices.Equal(c.Paths(), strict.Paths()) {
				t.Fatalf("%q: the strict rules accept it but the contained ones give OK=%v %q contained %v paths %v (strict %v)", text, c.OK, c.Error, c.Contained, c.Paths(), strict.Paths())
			}
			return
		}
		if c.OK && len(c.Contained) == 0 {
			t.Fatalf("%q: accepted only under the contained rules without naming what the walls contain", text)
		}
	})
}
