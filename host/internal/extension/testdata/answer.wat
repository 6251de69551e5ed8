;; answer: a hook plugin that answers with JSON from its manifest's config:
;; the value under the call's point ("PreCreate", "Validate", …), else the
;; value under "response", else "{}". With a config key "log" it logs each
;; request (info level) first, so a test can see what a point was handed
;; (PostStop's exitCode). Tests choose a plugin's adjustment, refusal or
;; error per point in its manifest. The point is read from the request's
;; start, {"point":"<name>", as the host encodes it.
(module
  (import "wasmlet" "config_get" (func $config_get (param i32 i32 i32 i32) (result i32)))
  (import "wasmlet" "log" (func $log (param i32 i32 i32)))
  (memory (export "memory") 2)
  (global $bump (mut i32) (i32.const 65536))
  (data (i32.const 16) "response")
  (data (i32.const 32) "{}")
  (data (i32.const 40) "log")
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
  ;; get reads config[key] into [1024, 65536) and returns its length, or a
  ;; negative errno.
  (func $get (param $k i32) (param $len i32) (result i32)
    (call $config_get (local.get $k) (local.get $len) (i32.const 1024) (i32.const 64512)))
  (func (export "wasmlet_hook") (param $p i32) (param $n i32) (result i64)
    (local $k i32) (local $len i32) (local $r i32)
    (if (i32.ge_s (call $config_get (i32.const 40) (i32.const 3) (i32.const 1024) (i32.const 0)) (i32.const 0))
      (then (call $log (i32.const 1) (local.get $p) (local.get $n))))
    ;; the point's name: from byte 10 ({"point":") to the next quote
    (local.set $k (i32.add (local.get $p) (i32.const 10)))
    (block $done
      (loop $next
        (br_if $done (i32.ge_u (i32.add (i32.const 10) (local.get $len)) (local.get $n)))
        (br_if $done (i32.eq (i32.load8_u (i32.add (local.get $k) (local.get $len))) (i32.const 34)))
        (local.set $len (i32.add (local.get $len) (i32.const 1)))
        (br $next)))
    (local.set $r (call $get (local.get $k) (local.get $len)))
    (if (i32.lt_s (local.get $r) (i32.const 0))
      (then (local.set $r (call $get (i32.const 16) (i32.const 8)))))
    (if (i32.lt_s (local.get $r) (i32.const 0))
      (then (return (i64.or (i64.shl (i64.const 32) (i64.const 32)) (i64.const 2)))))
    (if (i32.gt_s (local.get $r) (i32.const 64512)) (then (return (i64.const 0))))
    (i64.or (i64.shl (i64.const 1024) (i64.const 32)) (i64.extend_i32_u (local.get $r)))))
