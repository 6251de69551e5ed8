;; extismcheck: an Extism-ABI admission plugin (it allows every pod) whose
;; wasmlet_check_config refuses its config when config_get("refuse")
;; answers, with that value as its output (the refusal's message).
(module
  (import "extism:host/env" "alloc" (func $alloc (param i64) (result i64)))
  (import "extism:host/env" "store_u8" (func $store_u8 (param i64 i32)))
  (import "extism:host/env" "output_set" (func $output_set (param i64 i64)))
  (import "extism:host/env" "config_get" (func $config_get (param i64) (result i64)))
  (import "extism:host/env" "length" (func $length (param i64) (result i64)))
  (memory (export "memory") 1)
  (data (i32.const 16) "{\"allowed\":true}")
  (data (i32.const 64) "refuse")
  ;; copy $n bytes at $src into a new Extism memory block; return its offset
  (func $copy (param $src i32) (param $n i32) (result i64)
    (local $off i64) (local $i i32)
    (local.set $off (call $alloc (i64.extend_i32_u (local.get $n))))
    (block $done
      (loop $next
        (br_if $done (i32.ge_u (local.get $i) (local.get $n)))
        (call $store_u8 (i64.add (local.get $off) (i64.extend_i32_u (local.get $i)))
          (i32.load8_u (i32.add (local.get $src) (local.get $i))))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $next)))
    (local.get $off))
  (func (export "wasmlet_admit") (result i32)
    (call $output_set (call $copy (i32.const 16) (i32.const 16)) (i64.const 16))
    (i32.const 0))
  (func (export "wasmlet_check_config") (result i32)
    (local $v i64)
    (local.set $v (call $config_get (call $copy (i32.const 64) (i32.const 6))))
    (if (i64.ne (local.get $v) (i64.const 0))
      (then (call $output_set (local.get $v) (call $length (local.get $v)))))
    (i32.const 0)))
