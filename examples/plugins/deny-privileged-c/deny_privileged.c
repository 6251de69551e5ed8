/*
 * deny-privileged-c: the deny-privileged admission policy written in C
 * against wasmlet's raw ABI v1 (abi/v1/SPEC.md), with no SDK: it proves the
 * written contract is enough to build a plugin in another language.
 *
 * It denies a pod when any container, init container or ephemeral container
 * has securityContext.privileged set to true, unless the pod's namespace is
 * listed in the "allowNamespaces" config value (comma-separated).
 *
 * Build (hack/build-plugins.sh does this):
 *   clang-14 --target=wasm32-wasi --sysroot=/usr -O2 -mexec-model=reactor \
 *     -fuse-ld=lld-14 -o deny-privileged-c.wasm deny_privileged.c
 *
 * The JSON reading is a small validating scanner: it walks the request
 * once, descends only into pod.metadata and pod.spec.*containers[*], and
 * steps over everything else. Object keys are compared after unescaping, so
 * "privil\u0065ged" is recognised like "privileged".
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT(name) __attribute__((export_name(name)))
#define IMPORT(name) __attribute__((import_module("wasmlet"), import_name(name)))

/* ABI v1 host imports (only those this plugin uses). */
IMPORT("config_get") int32_t wasmlet_config_get(const char *key, int32_t key_len, char *buf, int32_t cap);
IMPORT("result_read") int32_t wasmlet_result_read(char *buf, int32_t cap);
IMPORT("log") void wasmlet_log(int32_t level, const char *msg, int32_t len);

/* ---- the version marker and the allocator ---- */

EXPORT("wasmlet_abi_v1") void wasmlet_abi_v1(void) {}

/* The admission request fields beyond the pod this plugin reads (SPEC
 * §2.4): none, so the host sends neither the node nor the pods on it. */
EXPORT("wasmlet_reads") int32_t wasmlet_reads(void) { return 0; }

static char *input;     /* the last buffer handed to the host */

EXPORT("wasmlet_alloc") char *wasmlet_alloc(int32_t size) {
	free(input);
	input = size >= 0 ? malloc(size > 0 ? (size_t)size : 1) : NULL;
	return input;
}

/* ---- the result: a growing buffer that stays valid until the next call ---- */

static char *out;
static size_t out_len, out_cap;

static void put(const char *s, size_t n) {
	if (out_len + n > out_cap) {
		size_t c = out_cap ? out_cap : 256;
		while (c < out_len + n) c *= 2;
		char *p = realloc(out, c);
		if (!p) return; /* truncated; the host rejects the JSON */
		out = p;
		out_cap = c;
	}
	memcpy(out + out_len, s, n);
	out_len += n;
}

static void puts_(const char *s) { put(s, strlen(s)); }

static int64_t result(void) {
	return ((int64_t)(uint32_t)(uintptr_t)out << 32) | (uint32_t)out_len;
}

/* ---- a validating JSON scanner ---- */

typedef struct {
	const char *p, *end, *start;
	int err;
} scanner;

typedef struct { const char *s; size_t n; } span; /* raw string content, escapes kept */

static char peek(scanner *sc) {
	while (sc->p < sc->end && (*sc->p == ' ' || *sc->p == '\t' || *sc->p == '\n' || *sc->p == '\r')) sc->p++;
	return sc->p < sc->end ? *sc->p : 0;
}

static void fail(scanner *sc) {
	if (!sc->err) sc->err = 1 + (int)(sc->p - sc->start);
	sc->p = sc->end;
}

static int hexval(char c) {
	if (c >= '0' && c <= '9') return c - '0';
	if (c >= 'a' && c <= 'f') return c - 'a' + 10;
	if (c >= 'A' && c <= 'F') return c - 'A' + 10;
	return -1;
}

/* string reads a string token and returns its raw content. */
static span string(scanner *sc) {
	span sp = {0, 0};
	if (peek(sc) != '"') { fail(sc); return sp; }
	const char *s = ++sc->p;
	while (sc->p < sc->end) {
		unsigned char c = (unsigned char)*sc->p;
		if (c == '"') { sp.s = s; sp.n = (size_t)(sc->p - s); sc->p++; return sp; }
		if (c < 0x20) break;
		if (c == '\\') {
			if (sc->p + 1 >= sc->end) break;
			char e = sc->p[1];
			if (e == 'u') {
				if (sc->end - sc->p < 6) break;
				for (int i = 2; i < 6; i++) if (hexval(sc->p[i]) < 0) { fail(sc); return sp; }
				sc->p += 6;
				continue;
			}
			if (!strchr("\"\\/bfnrt", e)) break;
			sc->p += 2;
			continue;
		}
		sc->p++;
	}
	fail(sc);
	return sp;
}

/* key_is compares a raw key with a plain ASCII name, decoding escapes. */
static int key_is(span k, const char *name) {
	size_t i = 0;
	for (const char *p = k.s, *e = k.s + k.n; p < e; i++) {
		char c = *p;
		if (c == '\\') {
			if (p[1] == 'u') {
				int v = hexval(p[2]) << 12 | hexval(p[3]) << 8 | hexval(p[4]) << 4 | hexval(p[5]);
				if (v > 0x7f) return 0;
				c = (char)v;
				p += 6;
			} else {
				switch (p[1]) {
				case 'b': c = '\b'; break;
				case 'f': c = '\f'; break;
				case 'n': c = '\n'; break;
				case 'r': c = '\r'; break;
				case 't': c = '\t'; break;
				default: c = p[1];
				}
				p += 2;
			}
		} else {
			p++;
		}
		if (name[i] != c) return 0;
	}
	return name[i] == 0;
}

static int literal(scanner *sc, const char *lit) {
	size_t n = strlen(lit);
	if ((size_t)(sc->end - sc->p) < n || memcmp(sc->p, lit, n) != 0) { fail(sc); return 0; }
	sc->p += n;
	return 1;
}

static void number(scanner *sc) {
	const char *p = sc->p;
	if (p < sc->end && *p == '-') p++;
	if (p < sc->end && *p == '0') p++;
	else if (p < sc->end && *p >= '1' && *p <= '9') while (p < sc->end && *p >= '0' && *p <= '9') p++;
	else { fail(sc); return; }
	if (p < sc->end && *p == '.') {
		const char *d = ++p;
		while (p < sc->end && *p >= '0' && *p <= '9') p++;
		if (p == d) { fail(sc); return; }
	}
	if (p < sc->end && (*p == 'e' || *p == 'E')) {
		p++;
		if (p < sc->end && (*p == '+' || *p == '-')) p++;
		const char *d = p;
		while (p < sc->end && *p >= '0' && *p <= '9') p++;
		if (p == d) { fail(sc); return; }
	}
	sc->p = p;
}

/*
 * Objects and arrays are walked with a counter: next(sc, &n, open, close)
 * consumes the opening bracket when n is 0, the comma otherwise, and returns
 * 0 at the end (or on null, or on error); members(sc, &n, &key) also reads
 * the key and the colon, elements(sc, &n) is next for an array.
 */
static int next(scanner *sc, int *n, char open, char close) {
	char c = peek(sc);
	if (*n == 0) {
		if (c == 'n') { literal(sc, "null"); return 0; }
		if (c != open) { fail(sc); return 0; }
		sc->p++;
		if (peek(sc) == close) { sc->p++; return 0; }
	} else {
		if (c == close) { sc->p++; return 0; }
		if (c != ',') { fail(sc); return 0; }
		sc->p++;
	}
	(*n)++;
	return !sc->err;
}

static int members(scanner *sc, int *n, span *key) {
	if (!next(sc, n, '{', '}')) return 0;
	*key = string(sc);
	if (peek(sc) != ':') { fail(sc); return 0; }
	sc->p++;
	return !sc->err;
}

static int elements(scanner *sc, int *n) { return next(sc, n, '[', ']'); }

static void skip(scanner *sc, int depth) {
	span k;
	int n = 0;
	if (depth > 1000) { fail(sc); return; }
	switch (peek(sc)) {
	case '"': string(sc); break;
	case '{': while (members(sc, &n, &k)) skip(sc, depth + 1); break;
	case '[': while (elements(sc, &n)) skip(sc, depth + 1); break;
	case 't': literal(sc, "true"); break;
	case 'f': literal(sc, "false"); break;
	case 'n': literal(sc, "null"); break;
	default:
		if (peek(sc) == '-' || (peek(sc) >= '0' && peek(sc) <= '9')) number(sc);
		else fail(sc);
	}
}

/* ---- the policy ---- */

typedef struct {
	span name, namespace;
	span privileged;   /* name of the first privileged container */
	int found;
} verdict;

/* strfield reads a string, or null (leaving *dst alone). */
static void strfield(scanner *sc, span *dst) {
	if (peek(sc) == 'n') { literal(sc, "null"); return; }
	*dst = string(sc);
}

static void container(scanner *sc, verdict *v) {
	span k, name = {"", 0};
	int n = 0, priv = 0;
	while (members(sc, &n, &k)) {
		if (key_is(k, "name")) {
			strfield(sc, &name);
		} else if (key_is(k, "securityContext")) {
			int m = 0;
			span k2;
			while (members(sc, &m, &k2)) {
				if (key_is(k2, "privileged")) {
					char c = peek(sc);
					if (c == 't') { literal(sc, "true"); priv = 1; }
					else if (c == 'f') { literal(sc, "false"); priv = 0; }
					else if (c == 'n') literal(sc, "null");
					else fail(sc); /* wrong type: Kubernetes would reject it too */
				} else {
					skip(sc, 0);
				}
			}
		} else {
			skip(sc, 0);
		}
	}
	if (priv && !v->found) { v->found = 1; v->privileged = name; }
}

static void pod(scanner *sc, verdict *v) {
	span k;
	int n = 0;
	while (members(sc, &n, &k)) {
		if (key_is(k, "metadata")) {
			int m = 0;
			span k2;
			while (members(sc, &m, &k2)) {
				if (key_is(k2, "name")) strfield(sc, &v->name);
				else if (key_is(k2, "namespace")) strfield(sc, &v->namespace);
				else skip(sc, 0);
			}
		} else if (key_is(k, "spec")) {
			int m = 0;
			span k2;
			while (members(sc, &m, &k2)) {
				if (key_is(k2, "containers") || key_is(k2, "initContainers") || key_is(k2, "ephemeralContainers")) {
					int e = 0;
					while (elements(sc, &e)) container(sc, v);
				} else {
					skip(sc, 0);
				}
			}
		} else {
			skip(sc, 0);
		}
	}
}

/* allowed_namespace reports whether ns is in the allowNamespaces config. */
static int allowed_namespace(span ns) {
	static const char key[] = "allowNamespaces";
	char small[256], *buf = small;
	int32_t n = wasmlet_config_get(key, sizeof key - 1, small, sizeof small);
	if (n < 0) return 0; /* not set */
	if (n > (int32_t)sizeof small) {
		buf = malloc((size_t)n);
		if (!buf) return 0;
		n = wasmlet_result_read(buf, n);
		if (n < 0) { free(buf); return 0; }
	}
	int ok = 0;
	for (int i = 0; i < n && !ok;) {
		int j = i;
		while (j < n && buf[j] != ',') j++;
		int a = i, b = j;
		while (a < b && buf[a] == ' ') a++;
		while (b > a && buf[b - 1] == ' ') b--;
		if ((size_t)(b - a) == ns.n && ns.n > 0 && memcmp(buf + a, ns.s, ns.n) == 0) ok = 1;
		i = j + 1;
	}
	if (buf != small) free(buf);
	return ok;
}

EXPORT("wasmlet_admit") int64_t wasmlet_admit(const char *ptr, int32_t len) {
	scanner sc = {ptr, ptr + (len > 0 ? len : 0), ptr, 0};
	verdict v = {{"", 0}, {"", 0}, {"", 0}, 0};
	span k;
	int n = 0;
	out_len = 0;
	while (members(&sc, &n, &k)) {
		if (key_is(k, "pod")) pod(&sc, &v);
		else skip(&sc, 0);
	}
	if (!sc.err && peek(&sc) != 0) fail(&sc);
	if (sc.err) {
		static const char msg[] = "deny-privileged-c: invalid admission request JSON";
		wasmlet_log(3, msg, sizeof msg - 1);
		puts_("{\"allowed\":false,\"error\":\"invalid admission request JSON\"}");
		return result();
	}
	if (!v.found || allowed_namespace(v.namespace)) {
		puts_("{\"allowed\":true}");
		return result();
	}
	/* Spans are raw JSON string contents: valid inside a JSON string as is. */
	puts_("{\"allowed\":false,\"reason\":\"Privileged\",\"message\":\"container ");
	put(v.privileged.s, v.privileged.n);
	puts_(" of pod ");
	put(v.namespace.s, v.namespace.n);
	puts_("/");
	put(v.name.s, v.name.n);
	puts_(" asks for a privileged security context\"}");
	return result();
}
