package wasiruntime

// TestboxWasm is testbox built for wasip1 by TestMain, for the external
// tests of this package.
func TestboxWasm() string { return testboxWasm }
