;; extism: an Extism-ABI plugin written against Extism's kernel imports (what
;; the PDKs compile to). Admission reads its input and denies when it holds a
;; '!'; hook reports a plugin error with error_set; source spins forever.
(module
  (import "extism:host/env" "input_length" (func $input_length (result i64)))
  (import "extism:host/env" "input_load_u8" (func $input_load_u8 (param i64) (result i32)))
  (import "extism:host/env" "alloc" (func $alloc (param i64) (result i64)))
  (import "extism:host/env" "store_u8" (func $store_u8 (param i64 i32)))
  (import "extism:host/env" "output_set" (func $output_set (param i64 i64)))
  (import "extism:host/env" "error_set" (func $error_set (param i64)))
  (memory (export "memory") 1)
  (data (i32.const 16) "{\"allowed\":true}")
  (data (i32.const 64) "{\"allowed\":false,\"reason\":\"Bang\"}")
  (data (i32.const 128) "hook failed on purpose")
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
  (func $hasbang (result i32)
    (local $i i64) (local $n i64)
    (local.set $n (call $input_length))
    (block $done
      (loop $next
        (br_if $done (i64.ge_u (local.get $i) (local.get $n)))
        (if (i32.eq (call $input_load_u8 (local.get $i)) (i32.const 33)) (then (return (i32.const 1))))
        (local.set $i (i64.add (local.get $i) (i64.const 1)))
        (br $next)))
    (i32.const 0))
  (func (export "wasmlet_admit") (result i32)
    (if (call $hasbang)
      (then (call $output_set (call $copy (i32.const 64) (i32.const 33)) (i64.const 33)))
      (else (call $output_set (call $copy (i32.const 16) (i32.const 16)) (i64.const 16))))
    (i32.const 0))
  (func (export "wasmlet_hook") (result i32)
    (call $error_set (call $copy (i32.const 128) (i32.const 22)))
    (i32.const 1))
  (func (export "wasmlet_source") (result i32)
    (loop $forever (br $forever))
    (i32.const 0)))
