module github.com/wasmlet/wasmlet/sdk

go 1.26.0

require (
	github.com/wasmlet/wasmlet/abi v0.0.0-00010101000000-000000000000
	sigs.k8s.io/json v0.0.0-20250730193827-2d320260d730
)

replace github.com/wasmlet/wasmlet/abi => ../abi
