;; checkconfig: ok.wat's admission with a wasmlet_check_config export that
;; refuses its config when config_get("refuse") answers, with that value as
;; the message, and returns an out-of-bounds message when "oob" is set.
;; Admission denies when the input contains the byte '!'.
(module
  (import "wasmlet" "config_get" (func $config_get (param i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 1)
  (global $bump (mut i32) (i32.const 4096))
  (data (i32.const 16) "{\"allowed\":true}")
  (data (i32.const 64) "{\"allowed\":false,\"reason\":\"Bang\",\"message\":\"input has a bang\"}")
  (data (i32.const 160) "refuse")
  (data (i32.const 176) "oob")
  (func (export "wasmlet_abi_v1"))
  (func (export "wasmlet_alloc") (param $n i32) (result i32)
    (local $p i32)
    (global.set $bump (i32.const 4096)) ;; one input per call: reuse the arena
    (local.set $p (global.get $bump))
    (if (i32.gt_u (i32.add (local.get $p) (local.get $n)) (i32.mul (memory.size) (i32.const 65536)))
      (then (if (i32.eq (memory.grow (i32.add (i32.shr_u (local.get $n) (i32.const 16)) (i32.const 1))) (i32.const -1))
        (then (return (i32.const 0))))))
    (global.set $bump (i32.add (local.get $p) (local.get $n)))
    (local.get $p))
  ;; the message buffer: [32768, 32768+16384)
  (func (export "wasmlet_check_config") (result i64)
    (local $n i32)
    (if (i32.ge_s (call $config_get (i32.const 176) (i32.const 3) (i32.const 32768) (i32.const 16384)) (i32.const 0))
      (then (return (i64.or (i64.shl (i64.const 65000) (i64.const 32)) (i64.const 4096)))))
    (local.set $n (call $config_get (i32.const 160) (i32.const 6) (i32.const 32768) (i32.const 16384)))
    (if (i32.lt_s (local.get $n) (i32.const 0)) (then (return (i64.const 0))))
    (if (i32.gt_s (local.get $n) (i32.const 16384)) (then (local.set $n (i32.const 16384))))
    (i64.or (i64.shl (i64.const 32768) (i64.const 32)) (i64.extend_i32_u (local.get $n))))
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
      (else (i64.or (i64.shl (i64.const 16) (i64.const 32)) (i64.const 16))))))
