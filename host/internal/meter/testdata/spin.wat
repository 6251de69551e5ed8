;; spin: a loop that never calls the host (meter_test.go stops it with the
;; tick) and a finite one.
(module
  (func (export "spin") (loop $l (br $l)))
  (func (export "count") (param $n i32) (result i32)
    (local $i i32)
    (loop $l
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br_if $l (i32.lt_u (local.get $i) (local.get $n))))
    (local.get $i)))
