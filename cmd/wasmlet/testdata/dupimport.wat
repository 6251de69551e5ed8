;; dupimport: a module that imports one host function under two indexes
;; (as some toolchains emit), for `wasmlet plugin inspect`.
(module
  (import "wasmlet" "log" (func $log1 (param i32 i32 i32)))
  (import "wasmlet" "log" (func $log2 (param i32 i32 i32)))
  (memory (export "memory") 1)
  (func (export "wasmlet_abi_v1")))
