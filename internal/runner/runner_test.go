package runner

// testRunner runs every test's Spec: the platform's launcher, or the
// portable one when TestPortableLauncher re-runs the package (TestMain).
var testRunner = New()
