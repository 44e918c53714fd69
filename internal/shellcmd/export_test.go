package shellcmd

// Exported for the tests of package shellcmd_test, which run texts for real
// through the interpreter and the exechost binary.
var (
	DifferentialCorpus = differentialCorpus
	BypassCorpus       = bypassCorpus
	AttackCorpus       = attackCorpus
	GeneratedCommands  = generatedCommands
)
