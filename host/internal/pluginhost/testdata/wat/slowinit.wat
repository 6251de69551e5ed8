;; slowinit: ok.wat whose _initialize spins through 2^29 loop iterations
;; first (about a second), a plugin slow to load. Admission denies when the
;; input contains the byte '!'.
(module
  (memory (export "memory") 1)
  (global $bump (mut i32) (i32.const 4096))
  (data (i32.const 16) "{\"allowed\":true}")
  (data (i32.const 64) "{\"allowed\":false,\"reason\":\"Bang\",\"message\":\"input has a bang\"}")
  (data (i32.const 160) "{\"updates\":[{\"op\":\"SET\",\"pods\":[]}]}")
  (data (i32.const 224) "{\"adjustment\":{\"env\":[{\"name\":\"A\",\"value\":\"1\"}]}}")
  (func (export "wasmlet_abi_v1"))
  (func (export "_initialize")
    (local $i i64)
    (local.set $i (i64.const 536870912))
    (loop $spin
      (local.set $i (i64.sub (local.get $i) (i64.const 1)))
      (br_if $spin (i64.ne (local.get $i) (i64.const 0)))))
  (func (export "wasmlet_alloc") (param $n i32) (result i32)
    (local $p i32)
    (global.set $bump (i32.const 4096)) ;; one input per call: reuse the arena
    (local.set $p (global.get $bump))
    (if (i32.gt_u (i32.add (local.get $p) (local.get $n)) (i32.mul (memory.size) (i32.const 65536)))
      (then (if (i32.eq (memory.grow (i32.add (i32.shr_u (local.get $n) (i32.const 16)) (i32.const 1))) (i32.const -1))
        (then (return (i32.const 0))))))
    (global.set $bump (i32.add (local.get $p) (local.get $n)))
    (local.get $p))
  (func $hasbang (param $p i32) (param $n i32) (result i32)
    (block $done
      (loop $next
        (br_if $done (i32.eqz (local.get $n)))
        (if (i32.eq (i32.load8_u (local.get $p)) (i32.const 33)) (then (return (i32.const 1))))
        (local.set $p (i32.add (local.get $p) (i32.const 1)))
        (local.set $n (i32.sub (local.get $n) (i32.const 1)))
        (br $next)))
    (i32.const 0))
  (func (export "wasmlet_admit") (param $p i32) (param $n i32) (result i64)
    (if (result i64) (call $hasbang (local.get $p) (local.get $n))
      (then (i64.or (i64.shl (i64.const 64) (i64.const 32)) (i64.const 62)))
      (else (i64.or (i64.shl (i64.const 16) (i64.const 32)) (i64.const 16)))))
  (func (export "wasmlet_source") (param i32 i32) (result i64)
    (i64.or (i64.shl (i64.const 160) (i64.const 32)) (i64.const 36)))
  (func (export "wasmlet_hook") (param i32 i32) (result i64)
    (i64.or (i64.shl (i64.const 224) (i64.const 32)) (i64.const 49))))
