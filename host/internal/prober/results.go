package prober

import (
	"context"
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// changed tells the agent the pod's status must be generated again.
func (m *Manager) changed(pod *v1.Pod) {
	if m.cfg.Changed != nil {
		m.cfg.Changed(pod.UID)
	}
}

func (m *Manager) event(pod *v1.Pod, eventType, reason, message string) {
	m.log.Debug("probe", "pod", pod.Namespace+"/"+pod.Name, "reason", reason, "message", message)
	if m.cfg.Events != nil {
		m.cfg.Events.Event(pod, eventType, reason, message)
	}
}

// count adds one to prober_probe_total, with the kubelet's result names.
func (m *Manager) count(kind Kind, pod *v1.Pod, container string, r result) {
	name := "successful"
	switch r {
	case resultFailure:
		name = "failed"
	case resultUnknown:
		name = "unknown"
	}
	m.probes.WithLabelValues(string(kind), name, container, pod.Name, pod.Namespace, string(pod.UID)).Inc()
}

// kill stops a container whose liveness or startup probe failed, with the
// probe's terminationGracePeriodSeconds when it sets one; the restart
// policy decides what comes next.
func (m *Manager) kill(pod *v1.Pod, c *v1.Container, containerID string, kind Kind, probe *v1.Probe) {
	msg := fmt.Sprintf("Container %s failed %s probe, will be restarted", c.Name, strings.ToLower(string(kind)))
	m.event(pod, v1.EventTypeNormal, "Killing", msg)
	_, id, _ := strings.Cut(containerID, "://")
	if err := m.cfg.Runtime.KillContainer(context.Background(), pod, c.Name, id, msg, probe.TerminationGracePeriodSeconds); err != nil {
		m.log.Warn("kill after a failed probe", "pod", pod.Namespace+"/"+pod.Name, "container", c.Name, "error", err)
	}
	m.changed(pod)
}
