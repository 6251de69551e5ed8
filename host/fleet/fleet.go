// Package fleet is the cluster-wide view of wasmlet's plugins: per
// WasmletPlugin, the nodes its selector picks, the digests they enforce and
// the errors they report in their WasmletNodes (wasmlet fleet status).
package fleet

import (
	"context"
	"fmt"
	"io"
	"sort"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	pluginsv1 "github.com/wasmlet/wasmlet/host/apis/plugins/v1alpha1"
	"github.com/wasmlet/wasmlet/host/internal/pluginapi"
)

// Plugin is one WasmletPlugin across the fleet: what `wasmlet fleet
// status` prints.
type Plugin struct {
	// Name, Image and Generation are the WasmletPlugin's.
	Name, Image string
	Generation  int64
	// Selected counts the Nodes its selector matches.
	Selected int
	// Digests counts the nodes enforcing each digest.
	Digests map[string]int
	// Errors are the nodes' errors for it, "NODE: ERROR", sorted.
	Errors []string
	// Pending are the selected nodes that report no version of it yet.
	Pending []string
	// Waiting are the nodes that have seen a newer generation and wait for
	// their turn in its rollout spread; LastTurn is the latest of their
	// turns.
	Waiting  []string
	LastTurn time.Time
	// SelectorError is why the selector could not be read, if it could not.
	SelectorError string
}

// Summarize summarizes plugins across nodes, from the nodes' WasmletNode
// reports.
func Summarize(plugins []pluginsv1.WasmletPlugin, nodes []v1.Node, reports []pluginsv1.WasmletNode) []Plugin {
	byNode := map[string]map[string]pluginsv1.PluginStatus{}
	for _, r := range reports {
		m := map[string]pluginsv1.PluginStatus{}
		for _, ps := range r.Status.Plugins {
			if ps.Source == pluginsv1.SourceAPI {
				m[ps.Name] = ps
			}
		}
		byNode[r.Name] = m
	}
	var out []Plugin
	for i := range plugins {
		p := &plugins[i]
		fp := Plugin{Name: p.Name, Image: p.Spec.Image, Generation: p.Generation, Digests: map[string]int{}}
		for _, n := range nodes {
			ok, err := pluginapi.Selects(p, n.Labels)
			if err != nil {
				fp.SelectorError = err.Error()
				break
			}
			if !ok {
				continue
			}
			fp.Selected++
			ps, reported := byNode[n.Name][p.Name]
			if ps.Enforced {
				fp.Digests[ps.Digest]++
			} else {
				fp.Pending = append(fp.Pending, n.Name)
			}
			if ps.WaitingUntil != nil {
				fp.Waiting = append(fp.Waiting, n.Name)
				if ps.WaitingUntil.After(fp.LastTurn) {
					fp.LastTurn = ps.WaitingUntil.Time
				}
			}
			if reported && ps.Error != "" {
				fp.Errors = append(fp.Errors, n.Name+": "+ps.Error)
			}
		}
		sort.Strings(fp.Errors)
		sort.Strings(fp.Pending)
		sort.Strings(fp.Waiting)
		out = append(out, fp)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Print writes the summaries for a person: per plugin, the nodes selected,
// how many enforce which digest, which report errors, which enforce
// nothing yet, which wait for their turn in the rollout, or that the selector matches no node.
func Print(w io.Writer, fleet []Plugin) {
	if len(fleet) == 0 {
		fmt.Fprintln(w, "no WasmletPlugins")
	}
	for _, fp := range fleet {
		fmt.Fprintf(w, "%s  %s  generation %d\n", fp.Name, fp.Image, fp.Generation)
		switch {
		case fp.SelectorError != "":
			fmt.Fprintf(w, "  selector error: %s\n", fp.SelectorError)
			continue
		case fp.Selected == 0:
			fmt.Fprintln(w, "  matches no node")
			continue
		}
		fmt.Fprintf(w, "  %d node(s) selected\n", fp.Selected)
		digests := make([]string, 0, len(fp.Digests))
		for d := range fp.Digests {
			digests = append(digests, d)
		}
		sort.Strings(digests)
		for _, d := range digests {
			shown := d
			if d == "" {
				shown = "(no digest)"
			}
			fmt.Fprintf(w, "  %d node(s) enforce %s\n", fp.Digests[d], shown)
		}
		if len(fp.Pending) > 0 {
			fmt.Fprintf(w, "  %d node(s) enforce no version: %v\n", len(fp.Pending), fp.Pending)
		}
		if len(fp.Waiting) > 0 {
			fmt.Fprintf(w, "  %d node(s) wait for their turn in the rollout spread, the last at %s\n",
				len(fp.Waiting), fp.LastTurn.UTC().Format(time.RFC3339))
		}
		for _, e := range fp.Errors {
			fmt.Fprintf(w, "  error on %s\n", e)
		}
	}
}

// Status reads the WasmletPlugins, the Nodes and the WasmletNodes through
// rc and summarizes them.
func Status(ctx context.Context, rc *rest.Config) ([]Plugin, error) {
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		return nil, err
	}
	kube, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, err
	}
	pl, err := dyn.Resource(pluginsv1.WasmletPlugins).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list WasmletPlugins: %w", err)
	}
	var plugins pluginsv1.WasmletPluginList
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(pl.UnstructuredContent(), &plugins); err != nil {
		return nil, fmt.Errorf("WasmletPlugins: %w", err)
	}
	nl, err := dyn.Resource(pluginsv1.WasmletNodes).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list WasmletNodes: %w", err)
	}
	var reports pluginsv1.WasmletNodeList
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(nl.UnstructuredContent(), &reports); err != nil {
		return nil, fmt.Errorf("WasmletNodes: %w", err)
	}
	nodes, err := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list Nodes: %w", err)
	}
	return Summarize(plugins.Items, nodes.Items, reports.Items), nil
}
