package pluginhost

import (
	"context"
	"sync"
)

// compiledCode is a plugin's compiled code: a wazero module (abi: v1) or an
// Extism compiled plugin.
type compiledCode interface {
	Close(context.Context) error
}

// codeSlot holds a plugin's compiled code, which reap unloads once the
// plugin is idle and the next call compiles again (the compilation cache
// makes that a lookup): the one mechanism behind both ABIs. It keeps the
// plugin's codeLoaded flag and its unload and reload counts.
type codeSlot[T compiledCode] struct {
	p *Plugin
	// compile compiles the code again after an unload.
	compile func(context.Context) (T, error)

	mu     sync.Mutex // guards code and loaded: unload and get race
	code   T
	loaded bool
}

// set installs the code compiled at load.
func (s *codeSlot[T]) set(code T) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.code, s.loaded = code, true
	s.p.codeLoaded.Store(true)
}

// peek returns the code without reloading it; false while unloaded.
func (s *codeSlot[T]) peek() (T, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.code, s.loaded
}

// get returns the code, compiling it again when it was unloaded;
// ErrClosed once the plugin is closed.
func (s *codeSlot[T]) get(ctx context.Context) (T, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.loaded {
		return s.code, nil
	}
	var none T
	if s.p.closed.Load() {
		return none, pluginError(s.p.manifest.Name, ErrClosed, "reload")
	}
	code, err := s.compile(ctx)
	if err != nil {
		return none, err
	}
	s.code, s.loaded = code, true
	s.p.codeLoaded.Store(true)
	s.p.stats.reloaded()
	return code, nil
}

// unload closes the code when drained reports that no instance is left
// (it runs under the slot's lock, so a call that starts meanwhile waits in
// get and compiles the code again); it reports whether it unloaded.
func (s *codeSlot[T]) unload(drained func() bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !drained() || !s.loaded {
		return false
	}
	s.drop(context.Background())
	s.p.stats.unloaded()
	return true
}

// close closes the code for good (the plugin is closing).
func (s *codeSlot[T]) close(ctx context.Context) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.loaded {
		s.drop(ctx)
	}
}

// drop closes the loaded code; s.mu is held.
func (s *codeSlot[T]) drop(ctx context.Context) {
	s.code.Close(ctx)
	var none T
	s.code, s.loaded = none, false
	s.p.codeLoaded.Store(false)
}
