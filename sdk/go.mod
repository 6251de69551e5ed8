module github.com/wasmlet/wasmlet/sdk

go 1.26.0

require github.com/wasmlet/wasmlet/abi v0.0.0-00010101000000-000000000000

replace github.com/wasmlet/wasmlet/abi => ../abi
