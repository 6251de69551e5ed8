;; oob: admission returns a result that lies beyond its one page of memory.
(module
  (memory (export "memory") 1)
  (func (export "wasmlet_abi_v1"))
  (func (export "wasmlet_alloc") (param i32) (result i32) (i32.const 1024))
  (func (export "wasmlet_admit") (param i32 i32) (result i64)
    (i64.or (i64.shl (i64.const 65000) (i64.const 32)) (i64.const 1000))))
