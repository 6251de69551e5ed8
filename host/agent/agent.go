package agent

import (
	"context"
	"errors"
)

// Agent is a running node agent: the sync loop and the parts it drives.
// Build it with New and start it with Run.
type Agent struct {
	cfg Config
}

// New checks cfg, fills in defaults and builds the agent's parts. It does
// not start anything; Run does.
func New(cfg Config) (*Agent, error) {
	return &Agent{cfg: cfg}, nil
}

// Run starts the agent and blocks until ctx is cancelled or a part fails.
// Running containers are left running on return, as the kubelet does.
func (a *Agent) Run(ctx context.Context) error {
	return errors.New("agent: not implemented yet")
}
