;; ptr0: admission returns result pointer 0 (the error convention).
(module
  (memory (export "memory") 1)
  (func (export "wasmlet_abi_v1"))
  (func (export "wasmlet_alloc") (param i32) (result i32) (i32.const 1024))
  (func (export "wasmlet_admit") (param i32 i32) (result i64) (i64.const 5)))
