// Package agent wires the host's parts together: Config → New → Run(ctx),
// and /healthz. It holds no logic of its own: the sync loop and its
// handlers are syncloop's, what a pod worker does is podsync's, the
// per-pod records podstate's, orphan cleanup housekeeping's, and the API
// server side cluster's (all under host/internal).
package agent

import (
	"fmt"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/wasmlet/wasmlet/host/apis/config/v1alpha1"
)

// Config is everything the agent needs: the node's configuration, which
// `wasmlet run` fills from its flags and --config file (its fields unset
// here take their defaults, see v1alpha1.WasmletConfiguration.SetDefaults;
// its LogLevel and LogJSON are for the program that makes Logger), and
// what a program hands the agent besides.
type Config struct {
	v1alpha1.WasmletConfiguration
	// Logger receives structured logs; nil discards them.
	Logger hclog.Logger
	// Registerer receives the agent's metrics; nil means a fresh registry.
	Registerer prometheus.Registerer
}

// complete returns cfg with its configuration defaulted, or the
// configuration's errors.
func (cfg Config) complete() (Config, error) {
	cfg.SetDefaults()
	if errs := cfg.Validate(); len(errs) > 0 {
		return cfg, fmt.Errorf("agent: invalid configuration: %w", errs.ToAggregate())
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	return cfg, nil
}
