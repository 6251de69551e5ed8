package pluginhost

import (
	"context"
	"sync"

	"github.com/tetratelabs/wazero"
)

// compiling serialises the compilations of one module, so that a directory
// whose files load in parallel may hold the same module twice. wazero
// publishes a module read from the file compilation cache in its in-memory
// table before the module is ready to instantiate: a second compilation of
// the same bytes at that moment gets it half made, and instantiating it
// panics (wazero issue 2547). Different modules compile in parallel.
type compiling struct {
	mu    sync.Mutex
	locks map[string]*moduleLock
}

type moduleLock struct {
	sync.Mutex
	users int
}

// lock waits until no other compilation of key runs, and returns the
// function that ends this one.
func (c *compiling) lock(key string) (unlock func()) {
	c.mu.Lock()
	if c.locks == nil {
		c.locks = map[string]*moduleLock{}
	}
	l := c.locks[key]
	if l == nil {
		l = &moduleLock{}
		c.locks[key] = l
	}
	l.users++
	c.mu.Unlock()
	l.Lock()
	return func() {
		l.Unlock()
		c.mu.Lock()
		if l.users--; l.users == 0 {
			delete(c.locks, key)
		}
		c.mu.Unlock()
	}
}

// extismKey is taken by every Extism compilation (before its module's key):
// each one compiles the Extism kernel, the same module for all.
const extismKey = "extism"

// moduleKey names the module file whose sha256 is digest as the deadline
// mechanism mode prepares it.
func moduleKey(digest string, mode DeadlineMode) string { return string(mode) + "/" + digest }

// compile compiles wasm, the module file whose sha256 is digest as mode
// prepares it, in r, no other compilation of the same module running
// meanwhile.
func (e *engine) compile(ctx context.Context, r wazero.Runtime, wasm []byte, digest string, mode DeadlineMode) (wazero.CompiledModule, error) {
	defer e.compiling.lock(moduleKey(digest, mode))()
	return r.CompileModule(ctx, wasm)
}
