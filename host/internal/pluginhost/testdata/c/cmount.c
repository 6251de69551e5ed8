// cmount: an ABI v1 hook plugin in C (wasi-libc) written against the raw
// ABI, without an SDK: at PreCreate it asks for a read-only bind mount of
// the host's /srv/shared at /shared, an adjustment its manifest must
// declare (permissions.adjust [mounts], permissions.hostPaths [/srv/shared]).
// Every other point gets an empty response.
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

__attribute__((export_name("wasmlet_abi_v1"))) void abi_v1(void) {}

static char *input;

__attribute__((export_name("wasmlet_alloc"))) void *wasmlet_alloc(uint32_t n) {
	free(input);
	input = malloc(n ? n : 1);
	return input;
}

static const char mount[] =
	"{\"adjustment\":{\"mounts\":[{\"hostPath\":\"/srv/shared\",\"containerPath\":\"/shared\",\"readOnly\":true}]}}";
static const char empty[] = "{}";

static uint64_t result(const char *s, uint32_t n) {
	return ((uint64_t)(uintptr_t)s << 32) | n;
}

// contains reports whether the n bytes at p hold the NUL-terminated needle.
static int contains(const char *p, uint32_t n, const char *needle) {
	size_t k = strlen(needle);
	for (uint32_t i = 0; i + k <= n; i++)
		if (memcmp(p + i, needle, k) == 0)
			return 1;
	return 0;
}

__attribute__((export_name("wasmlet_hook"))) uint64_t wasmlet_hook(char *p, uint32_t n) {
	if (contains(p, n, "\"point\":\"PreCreate\""))
		return result(mount, sizeof mount - 1);
	return result(empty, sizeof empty - 1);
}
