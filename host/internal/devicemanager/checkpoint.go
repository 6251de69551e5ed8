package devicemanager

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"google.golang.org/protobuf/proto"
	"k8s.io/apimachinery/pkg/types"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/wasmlet/wasmlet/host/internal/regularfile"
)

// CheckpointName is the checkpoint's file name in the plugin directory
// (wasmlet's own format, so not the kubelet's kubelet_internal_checkpoint).
const CheckpointName = "wasmlet_internal_checkpoint"

// checkpoint is the file's content: one entry per container and resource.
type checkpoint struct {
	Entries []checkpointEntry `json:"entries"`
}

type checkpointEntry struct {
	PodUID    types.UID `json:"podUID"`
	Pod       string    `json:"pod"`
	Container string    `json:"container"`
	Resource  string    `json:"resource"`
	DeviceIDs []string  `json:"deviceIDs"`
	// Response is the plugin's ContainerAllocateResponse, protobuf-encoded.
	Response []byte `json:"allocateResponse"`
}

func (m *Manager) checkpointPath() string { return filepath.Join(m.dir, CheckpointName) }

// readCheckpoint loads the allocations of the checkpoint; a missing file is
// none, a broken one is logged and ignored, as the kubelet does.
func (m *Manager) readCheckpoint() error {
	data, err := os.ReadFile(m.checkpointPath())
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("devicemanager: checkpoint %s: %w", m.checkpointPath(), err)
	}
	var cp checkpoint
	if err := json.Unmarshal(data, &cp); err != nil {
		m.log.Error("device checkpoint unreadable; starting without its allocations", "file", m.checkpointPath(), "error", err)
		return nil
	}
	for _, e := range cp.Entries {
		resp := &pluginapi.ContainerAllocateResponse{}
		if err := proto.Unmarshal(e.Response, resp); err != nil {
			m.log.Error("device checkpoint entry unreadable; skipped", "file", m.checkpointPath(), "pod", e.Pod, "container", e.Container, "resource", e.Resource, "error", err)
			continue
		}
		pa := m.allocations[e.PodUID]
		if pa == nil {
			pa = &podAllocation{Pod: e.Pod, Containers: map[string]map[string]*allocation{}}
			m.allocations[e.PodUID] = pa
		}
		if pa.Containers[e.Container] == nil {
			pa.Containers[e.Container] = map[string]*allocation{}
		}
		pa.Containers[e.Container][e.Resource] = &allocation{DeviceIDs: e.DeviceIDs, Response: resp}
	}
	return nil
}

// writeCheckpoint writes the allocations, whole (a temporary file renamed
// over the old one). A failure is logged: the allocations stand in memory.
func (m *Manager) writeCheckpoint() {
	var cp checkpoint
	m.mu.Lock()
	for uid, pa := range m.allocations {
		for c, byRes := range pa.Containers {
			for res, a := range byRes {
				b, err := proto.Marshal(a.Response)
				if err != nil {
					m.log.Error("device checkpoint: encode the plugin's answer", "pod", pa.Pod, "container", c, "resource", res, "error", err)
					continue
				}
				cp.Entries = append(cp.Entries, checkpointEntry{PodUID: uid, Pod: pa.Pod, Container: c, Resource: res, DeviceIDs: a.DeviceIDs, Response: b})
			}
		}
	}
	m.mu.Unlock()
	data, err := json.Marshal(cp)
	if err == nil {
		err = os.MkdirAll(m.dir, 0o750)
	}
	if err == nil {
		err = regularfile.WriteAtomic(m.checkpointPath(), data)
	}
	if err != nil {
		m.log.Error("device checkpoint not written", "file", m.checkpointPath(), "error", err)
	}
}
