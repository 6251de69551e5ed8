;; work: a compute loop for the deadline benchmarks. Admission runs a loop of
;; 1<<20 iterations over memory, then answers allowed. Source returns at once
;; (the empty call).
(module
  (memory (export "memory") 1)
  (data (i32.const 16) "{\"allowed\":true}")
  (func (export "wasmlet_abi_v1"))
  (func (export "wasmlet_alloc") (param i32) (result i32) (i32.const 1024))
  (func (export "wasmlet_admit") (param i32 i32) (result i64)
    (local $i i32)
    (loop $next
      (i32.store offset=4096 (i32.and (i32.shl (local.get $i) (i32.const 2)) (i32.const 4092))
        (i32.add (i32.load offset=4096 (i32.and (i32.shl (local.get $i) (i32.const 2)) (i32.const 4092))) (local.get $i)))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br_if $next (i32.lt_u (local.get $i) (i32.const 1048576))))
    (i64.or (i64.shl (i64.const 16) (i64.const 32)) (i64.const 16)))
  (func (export "wasmlet_source") (param i32 i32) (result i64)
    (i64.or (i64.shl (i64.const 16) (i64.const 32)) (i64.const 16))))
