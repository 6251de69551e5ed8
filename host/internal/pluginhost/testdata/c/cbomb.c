// cbomb: an ABI v1 plugin in C (wasi-libc) whose admission mallocs 1 MiB
// blocks until malloc fails, then reports the failure as result pointer 0.
// Its source export traps (__builtin_trap, the C equivalent of a panic).
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

__attribute__((export_name("wasmlet_abi_v1"))) void abi_v1(void) {}

__attribute__((export_name("wasmlet_alloc"))) void *wasmlet_alloc(uint32_t n) {
	return malloc(n ? n : 1);
}

static void *volatile sink;

__attribute__((export_name("wasmlet_admit"))) uint64_t wasmlet_admit(char *p, uint32_t n) {
	free(p);
	for (;;) {
		void *b = malloc(1 << 20);
		if (!b)
			return 0; // pointer 0: the host reports the failure
		memset(b, 1, 1 << 20);
		sink = b;
	}
}

__attribute__((export_name("wasmlet_source"))) uint64_t wasmlet_source(char *p, uint32_t n) {
	__builtin_trap();
}
