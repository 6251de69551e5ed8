module github.com/wasmlet/wasmlet/plugins

go 1.26.0

require (
	github.com/wasmlet/wasmlet/sdk v0.0.0-00010101000000-000000000000
	github.com/wasmlet/wasmlet/sdk/sdktest v0.0.0-00010101000000-000000000000
	go.yaml.in/yaml/v2 v2.4.4
)

require github.com/wasmlet/wasmlet/abi v0.0.0-00010101000000-000000000000 // indirect

replace (
	github.com/wasmlet/wasmlet/abi => ../abi
	github.com/wasmlet/wasmlet/sdk => ../sdk
	github.com/wasmlet/wasmlet/sdk/sdktest => ../sdk/sdktest
)
