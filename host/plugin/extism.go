package plugin

import (
	"context"
	"errors"

	"github.com/wasmlet/wasmlet/abi"
)

type extismPlugin struct{}

func (e *engine) loadExtism(ctx context.Context, src *source, overrides map[string]string) (*Plugin, error) {
	return nil, errors.New("extism: not implemented yet")
}

func (x *extismPlugin) call(ctx context.Context, k abi.Kind, input []byte) ([]byte, error) {
	return nil, errors.New("extism: not implemented yet")
}

func (x *extismPlugin) close(ctx context.Context) {}
