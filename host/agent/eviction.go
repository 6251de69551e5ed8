package agent

import (
	"context"
	"fmt"

	"github.com/wasmlet/wasmlet/host/internal/admission"
	"github.com/wasmlet/wasmlet/host/internal/eviction"
	"github.com/wasmlet/wasmlet/host/internal/housekeeping"
	"github.com/wasmlet/wasmlet/host/internal/nodememory"
	"github.com/wasmlet/wasmlet/host/internal/worker"
)

// newEviction wires the eviction manager: the thresholds from the
// configuration, the signals read from the root memory cgroup, the root
// directory's filesystem and the runtime's image filesystem, dead
// containers and unused images reclaimed first, and the kernel's memory
// notification when asked for.
func (a *Agent) newEviction(workers *worker.Workers, cleaner *housekeeping.Cleaner) (*eviction.Manager, error) {
	thresholds, err := eviction.ParseThresholds(eviction.ThresholdConfig{
		Hard: a.cfg.EvictionHard, Soft: a.cfg.EvictionSoft,
		SoftGracePeriod: a.cfg.EvictionSoftGracePeriod, MinimumReclaim: a.cfg.EvictionMinimumReclaim,
	})
	if err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	ocfg := eviction.ObserverConfig{NodeFs: a.cfg.RootDir, ImageFs: a.images.Mountpoint}
	cfg := eviction.Config{
		Stats: a.stats, Pods: a.pods, Statuses: a.statuses, Workers: workers, Events: a.cluster,
		NodeEvent:                a.cluster.NodeEvent,
		Thresholds:               thresholds,
		Reclaim:                  eviction.Reclaim{Containers: cleaner.DeleteUnusedContainers, Images: a.images.DeleteUnusedImages},
		MaxPodGracePeriod:        int64(a.cfg.EvictionMaxPodGracePeriod),
		PressureTransitionPeriod: a.cfg.EvictionPressureTransitionPeriod.Duration,
		Logger:                   a.log.Named("eviction"), Registerer: a.reg,
	}
	mem, err := nodememory.New(nodememory.Config{})
	if err != nil {
		a.log.Error("memory.available not observed: the root memory cgroup cannot be read", "error", err)
	} else {
		ocfg.Memory = mem.Read
		if a.cfg.KernelMemcgNotification {
			n, err := mem.NewNotifier()
			if err != nil {
				a.log.Warn("kernel memcg notification not used; memory.available is read every period", "error", err)
			} else {
				cfg.Notifier = n
				cfg.MemoryUsage = func() (uint64, uint64, uint64, error) {
					s, err := mem.Read()
					return s.Capacity, s.Usage, s.WorkingSet, err
				}
			}
		}
	}
	cfg.Signals = eviction.NewObserver(ocfg)
	m, err := eviction.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	return m, nil
}

// pressureAdmitter is the eviction manager's place in the admission chain.
// The chain is made before the runtime is connected (the allocation
// manager wraps it), the eviction manager after it (it reclaims through
// the runtime); pods are admitted only once the sync loop runs, after both
// are built. Before the manager is there no pressure has been observed,
// and a pod is admitted as under no pressure.
type pressureAdmitter struct{ a *Agent }

// Name is the eviction manager's name in results, logs and metrics.
func (p pressureAdmitter) Name() string { return "eviction" }

// Admit asks the eviction manager: under node pressure it refuses what the
// kubelet's eviction admitter refuses.
func (p pressureAdmitter) Admit(ctx context.Context, attrs admission.Attributes) (admission.Result, error) {
	if p.a.evictions == nil {
		return admission.Result{Admit: true}, nil
	}
	return p.a.evictions.Admit(ctx, attrs)
}
