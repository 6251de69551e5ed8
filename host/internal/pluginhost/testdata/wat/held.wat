;; held: admission asks the host for the node's info, then spins until its
;; deadline stops it. The node_info import runs inside the call, so a test
;; whose Config.NodeInfo waits there holds the instance for as long as it
;; likes, and knows that it does.
(module
  (import "wasmlet" "node_info" (func $node_info (param i32 i32) (result i32)))
  (memory (export "memory") 1)
  (func (export "wasmlet_abi_v1"))
  (func (export "wasmlet_alloc") (param i32) (result i32) (i32.const 1024))
  (func (export "wasmlet_admit") (param i32 i32) (result i64)
    (drop (call $node_info (i32.const 2048) (i32.const 0)))
    (loop $forever (br $forever))
    (i64.const 0)))
