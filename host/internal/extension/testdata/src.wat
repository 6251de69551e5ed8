;; src: a source plugin that always answers the same SET of one pod and asks
;; for the next poll after 50 ms; its admission export fails cleanly and its
;; hook export answers {"error": ...}.
(module
  (memory (export "memory") 1)
  (data (i32.const 16) "{\"updates\":[{\"op\":\"SET\",\"pods\":[{\"metadata\":{\"name\":\"p\"},\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":\"i\"}]}}]}],\"nextPollMillis\":50}")
  (data (i32.const 512) "{\"error\":\"no decision\"}")
  (func (export "wasmlet_abi_v1"))
  (func (export "wasmlet_alloc") (param i32) (result i32) (i32.const 4096))
  (func (export "wasmlet_source") (param i32 i32) (result i64)
    (i64.or (i64.shl (i64.const 16) (i64.const 32)) (i64.const 130)))
  (func (export "wasmlet_admit") (param i32 i32) (result i64)
    (i64.or (i64.shl (i64.const 512) (i64.const 32)) (i64.const 23)))
  (func (export "wasmlet_hook") (param i32 i32) (result i64)
    (i64.or (i64.shl (i64.const 512) (i64.const 32)) (i64.const 23))))
