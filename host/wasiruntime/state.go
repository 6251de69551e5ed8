package wasiruntime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// sandbox is one pod sandbox. A WASI sandbox owns nothing but a record: its
// containers share the node's network and have no namespaces to set up.
type sandbox struct {
	ID          string                         `json:"id"`
	Metadata    *runtimeapi.PodSandboxMetadata `json:"metadata"`
	State       runtimeapi.PodSandboxState     `json:"state"`
	CreatedAt   int64                          `json:"createdAt"`
	Labels      map[string]string              `json:"labels,omitempty"`
	Annotations map[string]string              `json:"annotations,omitempty"`
	Hostname    string                         `json:"hostname,omitempty"`
	LogDir      string                         `json:"logDirectory,omitempty"`
	Handler     string                         `json:"runtimeHandler,omitempty"`
}

// container is one container: its spec as created, and its state. The
// persisted part is the exported fields; mu guards State and what follows.
type container struct {
	ID          string                        `json:"id"`
	SandboxID   string                        `json:"sandboxId"`
	Metadata    *runtimeapi.ContainerMetadata `json:"metadata"`
	Image       string                        `json:"image"`    // as requested
	ImageRef    string                        `json:"imageRef"` // image ID
	Labels      map[string]string             `json:"labels,omitempty"`
	Annotations map[string]string             `json:"annotations,omitempty"`
	Argv        []string                      `json:"argv"`
	Env         []string                      `json:"env,omitempty"` // NAME=value
	WorkingDir  string                        `json:"workingDir,omitempty"`
	Mounts      []*runtimeapi.Mount           `json:"mounts,omitempty"`
	LogPath     string                        `json:"logPath,omitempty"` // absolute
	MemoryLimit int64                         `json:"memoryLimit,omitempty"`
	CreatedAt   int64                         `json:"createdAt"`

	State      runtimeapi.ContainerState `json:"state"`
	StartedAt  int64                     `json:"startedAt,omitempty"`
	FinishedAt int64                     `json:"finishedAt,omitempty"`
	ExitCode   int32                     `json:"exitCode"`
	Reason     string                    `json:"reason,omitempty"`
	Message    string                    `json:"message,omitempty"`

	mu       sync.Mutex
	cancel   context.CancelFunc // ends the running instance
	done     chan struct{}      // closed when the instance has ended
	stopping bool
	logs     *logFile
	force    func() // closes the module outright
	usage    *usage // a running instance's stats
	layer    layer  // its scratch root's usage, as last measured
}

// stateDir persists sandboxes and containers as one JSON file each.
type stateDir struct{ dir string }

func openStateDir(dir string) (*stateDir, error) {
	for _, d := range []string{"sandboxes", "containers"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return nil, err
		}
	}
	return &stateDir{dir: dir}, nil
}

func (s *stateDir) path(kind, id string) string {
	return filepath.Join(s.dir, kind, id+".json")
}

func (s *stateDir) put(kind, id string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	tmp := s.path(kind, id) + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, s.path(kind, id))
}

func (s *stateDir) remove(kind, id string) error {
	err := os.Remove(s.path(kind, id))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}

func (s *stateDir) each(kind string, f func(b []byte) error) error {
	ents, err := os.ReadDir(filepath.Join(s.dir, kind))
	if err != nil {
		return err
	}
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(s.dir, kind, e.Name()))
		if err != nil {
			return err
		}
		if err := f(b); err != nil {
			return fmt.Errorf("%s: %w", e.Name(), err)
		}
	}
	return nil
}

// saveSandbox persists a sandbox; a failure is logged, not fatal: the
// in-memory state stays authoritative while the process lives.
func (r *Runtime) saveSandbox(sb *sandbox) {
	if err := r.state.put("sandboxes", sb.ID, sb); err != nil {
		r.log.Error("persist sandbox", "sandbox", sb.ID, "error", err)
	}
}

// saveContainer persists a container; the caller holds c.mu.
func (r *Runtime) saveContainer(c *container) {
	if err := r.state.put("containers", c.ID, c); err != nil {
		r.log.Error("persist container", "container", c.ID, "error", err)
	}
}

// load reads the state of a previous run. Containers that were running died
// with that process: they are recorded as exited.
func (r *Runtime) load() error {
	if err := r.state.each("sandboxes", func(b []byte) error {
		sb := &sandbox{}
		if err := json.Unmarshal(b, sb); err != nil {
			return err
		}
		r.sandboxes[sb.ID] = sb
		r.names[sandboxName(sb.Metadata)] = sb.ID
		return nil
	}); err != nil {
		return err
	}
	now := time.Now().UnixNano()
	return r.state.each("containers", func(b []byte) error {
		c := &container{}
		if err := json.Unmarshal(b, c); err != nil {
			return err
		}
		if c.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
			c.State = runtimeapi.ContainerState_CONTAINER_EXITED
			c.FinishedAt = now
			c.ExitCode = 255
			c.Reason = "Error"
			c.Message = "the wasmlet runtime restarted while the container was running"
			r.saveContainer(c)
		}
		r.containers[c.ID] = c
		r.names[containerName(c.SandboxID, c.Metadata)] = c.ID
		return nil
	})
}

func sandboxName(m *runtimeapi.PodSandboxMetadata) string {
	return fmt.Sprintf("sandbox/%s_%s_%s_%d", m.GetName(), m.GetNamespace(), m.GetUid(), m.GetAttempt())
}

func containerName(sandboxID string, m *runtimeapi.ContainerMetadata) string {
	return fmt.Sprintf("container/%s/%s_%d", sandboxID, m.GetName(), m.GetAttempt())
}
