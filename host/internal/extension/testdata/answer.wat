;; answer: a hook plugin that answers every call with the JSON its
;; manifest's config holds under "response" ("{}" without one), so tests
;; choose a plugin's adjustment, refusal or error in its manifest.
(module
  (import "wasmlet" "config_get" (func $config_get (param i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 2)
  (global $bump (mut i32) (i32.const 65536))
  (data (i32.const 16) "response")
  (data (i32.const 32) "{}")
  (func (export "wasmlet_abi_v1"))
  (func (export "wasmlet_alloc") (param $n i32) (result i32)
    (local $p i32)
    (global.set $bump (i32.const 65536)) ;; one input per call: reuse the arena
    (local.set $p (global.get $bump))
    (if (i32.gt_u (i32.add (local.get $p) (local.get $n)) (i32.mul (memory.size) (i32.const 65536)))
      (then (if (i32.eq (memory.grow (i32.add (i32.shr_u (local.get $n) (i32.const 16)) (i32.const 1))) (i32.const -1))
        (then (return (i32.const 0))))))
    (global.set $bump (i32.add (local.get $p) (local.get $n)))
    (local.get $p))
  ;; The response is read into [1024, 65536): 63 KiB at most.
  (func (export "wasmlet_hook") (param i32 i32) (result i64)
    (local $n i32)
    (local.set $n (call $config_get (i32.const 16) (i32.const 8) (i32.const 1024) (i32.const 64512)))
    (if (i32.lt_s (local.get $n) (i32.const 0))
      (then (return (i64.or (i64.shl (i64.const 32) (i64.const 32)) (i64.const 2)))))
    (if (i32.gt_s (local.get $n) (i32.const 64512)) (then (return (i64.const 0))))
    (i64.or (i64.shl (i64.const 1024) (i64.const 32)) (i64.extend_i32_u (local.get $n)))))
