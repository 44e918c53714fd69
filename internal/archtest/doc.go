// Package archtest holds tests about the module's structure rather than its
// behaviour: today, that every import points down the layering table of
// CONTRIBUTING.md ("Package layering"). It has no non-test code.
package archtest
