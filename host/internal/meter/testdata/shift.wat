;; shift: exercises every place the deadline meter must renumber functions
;; (rewrite_test.go runs it before and after metering and compares): an
;; imported function, an active element segment, a declarative one, a
;; funcref global initialised with ref.func, a start function, exports,
;; call, call_indirect and table.set; plus a loop long enough to tick.
(module
  (import "env" "add1" (func $add1 (param i32) (result i32)))
  (type $t (func (param i32) (result i32)))
  (table 3 funcref)
  (elem (i32.const 0) $double $add1 $triple)
  (elem declare func $triple)
  (global $g (mut i32) (i32.const 0))
  (global $fr funcref (ref.func $double))
  (memory 1)
  (start $init)
  (func $init (global.set $g (i32.const 5)))
  (func $double (param i32) (result i32) (i32.mul (local.get 0) (i32.const 2)))
  (func $triple (param i32) (result i32) (i32.mul (local.get 0) (i32.const 3)))
  (func (export "run") (param $x i32) (result i32)
    (i32.add (global.get $g)
      (i32.add (call_indirect (type $t) (local.get $x) (i32.const 0))
        (i32.add (call_indirect (type $t) (local.get $x) (i32.const 1))
          (call $triple (local.get $x))))))
  (func (export "viaref") (param i32) (result i32)
    (table.set 0 (i32.const 2) (global.get $fr))
    (call_indirect (type $t) (local.get 0) (i32.const 2)))
  (func (export "sum") (param $n i32) (result i32)
    (local $i i32) (local $s i32)
    (block $done
      (loop $next
        (br_if $done (i32.ge_u (local.get $i) (local.get $n)))
        (local.set $s (i32.add (local.get $s) (call $double (local.get $i))))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $next)))
    (local.get $s)))
