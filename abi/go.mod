module github.com/wasmlet/wasmlet/abi

go 1.26.0
