package pluginhost_test

import (
	"context"
	"fmt"
	"os"

	"github.com/wasmlet/wasmlet/abi"
	"github.com/wasmlet/wasmlet/host/internal/pluginhost"
)

// A Manager keeps a plugin directory loaded and reloads it on change.
func ExampleManager() {
	dir, _ := os.MkdirTemp("", "plugins")
	defer os.RemoveAll(dir)
	m, err := pluginhost.NewManager(pluginhost.Config{Dir: dir})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- m.Run(ctx) }() // scans, then watches until ctx ends
	defer func() { cancel(); <-done }()
	for _, p := range m.Admitters() { // ordered by manifest order, then name
		_, _ = p.Admit(ctx, &abi.AdmitRequest{Pod: []byte(`{}`)})
	}
	fmt.Println(len(m.Plugins()))
	// Output: 0
}
