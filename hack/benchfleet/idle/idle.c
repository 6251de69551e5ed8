// The workload of make bench-fleet's pods on wasmlet nodes: a WASI command
// that sleeps forever (hack/bench-fleet.sh builds it with clang-14
// --target=wasm32-wasi; ~23 KB, so compiling it costs a node next to
// nothing and the figures are the agent's, not the workload's).
#include <unistd.h>

int main(void) {
	for (;;)
		sleep(3600);
}
