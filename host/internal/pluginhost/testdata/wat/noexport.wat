;; noexport: a version marker and alloc, but no kind export.
(module
  (memory (export "memory") 1)
  (func (export "wasmlet_abi_v1"))
  (func (export "wasmlet_alloc") (param i32) (result i32) (i32.const 1024)))
