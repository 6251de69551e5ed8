package admission

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/wasmlet/wasmlet/internal/metrictest"
)

func node(cpu, mem string, pods int64) *v1.Node {
	return &v1.Node{Status: v1.NodeStatus{Allocatable: v1.ResourceList{
		v1.ResourceCPU:    resource.MustParse(cpu),
		v1.ResourceMemory: resource.MustParse(mem),
		v1.ResourcePods:   *resource.NewQuantity(pods, resource.DecimalSI),
	}}}
}

type podOpt func(*v1.Pod)

func requests(cpu, mem string) podOpt {
	return func(p *v1.Pod) {
		rl := v1.ResourceList{}
		if cpu != "" {
			rl[v1.ResourceCPU] = resource.MustParse(cpu)
		}
		if mem != "" {
			rl[v1.ResourceMemory] = resource.MustParse(mem)
		}
		p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: fmt.Sprint(len(p.Spec.Containers)), Resources: v1.ResourceRequirements{Requests: rl}})
	}
}

func initRequests(cpu string) podOpt {
	return func(p *v1.Pod) {
		p.Spec.InitContainers = append(p.Spec.InitContainers, v1.Container{Name: "init", Resources: v1.ResourceRequirements{
			Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu)}}})
	}
}

func gpus(name, n string) podOpt {
	return func(p *v1.Pod) {
		rl := v1.ResourceList{v1.ResourceName(name): resource.MustParse(n)}
		p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: "g", Resources: v1.ResourceRequirements{Requests: rl, Limits: rl}})
	}
}

func port(ip string, hostPort int32, proto v1.Protocol) podOpt {
	return func(p *v1.Pod) {
		p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: "p", Ports: []v1.ContainerPort{{HostIP: ip, HostPort: hostPort, ContainerPort: 80, Protocol: proto}}})
	}
}

func hostNet(containerPort int32) podOpt {
	return func(p *v1.Pod) {
		p.Spec.HostNetwork = true
		p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: "h", Ports: []v1.ContainerPort{{ContainerPort: containerPort}}})
	}
}

func mkPod(name string, opts ...podOpt) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}}
	for _, o := range opts {
		o(p)
	}
	return p
}

func TestBuiltins(t *testing.T) {
	n := node("2", "1Gi", 3)
	n.Status.Allocatable["test.device/gpu"] = resource.MustParse("2")
	n.Status.Allocatable["test.device/none"] = resource.MustParse("0")
	tests := []struct {
		name       string
		admitter   Admitter
		pod        *v1.Pod
		existing   []*v1.Pod
		wantReason string // "" means admitted
	}{
		{"max pods: room", MaxPods(0), mkPod("p"), []*v1.Pod{mkPod("a"), mkPod("b")}, ""},
		{"max pods: full by node", MaxPods(0), mkPod("p"), []*v1.Pod{mkPod("a"), mkPod("b"), mkPod("c")}, "OutOfpods"},
		{"max pods: explicit limit", MaxPods(1), mkPod("p"), []*v1.Pod{mkPod("a")}, "OutOfpods"},
		{"fit: no requests", ResourceFit(), mkPod("p"), []*v1.Pod{mkPod("a", requests("2", "1Gi"))}, ""},
		{"fit: fits", ResourceFit(), mkPod("p", requests("1", "512Mi")), []*v1.Pod{mkPod("a", requests("1", "512Mi"))}, ""},
		{"fit: cpu exhausted", ResourceFit(), mkPod("p", requests("500m", "")), []*v1.Pod{mkPod("a", requests("1600m", ""))}, "OutOfcpu"},
		{"fit: memory exhausted", ResourceFit(), mkPod("p", requests("", "600Mi")), []*v1.Pod{mkPod("a", requests("", "500Mi"))}, "OutOfmemory"},
		{"fit: containers add up", ResourceFit(), mkPod("p", requests("1", ""), requests("1500m", "")), nil, "OutOfcpu"},
		{"fit: init container is the max, not added", ResourceFit(), mkPod("p", requests("1", ""), initRequests("2")), nil, ""},
		{"fit: init container too big", ResourceFit(), mkPod("p", requests("1", ""), initRequests("3")), nil, "OutOfcpu"},
		{"fit: extended resource the node does not list is the cluster's", ResourceFit(), mkPod("p", gpus("example.com/gpu", "1")), nil, ""},
		{"fit: extended resource fits", ResourceFit(), mkPod("p", gpus("test.device/gpu", "1")), []*v1.Pod{mkPod("a", gpus("test.device/gpu", "1"))}, ""},
		{"fit: extended resource exhausted", ResourceFit(), mkPod("p", gpus("test.device/gpu", "1")), []*v1.Pod{mkPod("a", gpus("test.device/gpu", "2"))}, "OutOftest.device/gpu"},
		{"fit: extended resource with allocatable 0", ResourceFit(), mkPod("p", gpus("test.device/none", "1")), nil, "OutOftest.device/none"},
		{"ports: none", HostPorts(), mkPod("p"), []*v1.Pod{mkPod("a", port("", 8080, v1.ProtocolTCP))}, ""},
		{"ports: conflict", HostPorts(), mkPod("p", port("", 8080, "")), []*v1.Pod{mkPod("a", port("", 8080, v1.ProtocolTCP))}, "NodePorts"},
		{"ports: other protocol", HostPorts(), mkPod("p", port("", 8080, v1.ProtocolUDP)), []*v1.Pod{mkPod("a", port("", 8080, v1.ProtocolTCP))}, ""},
		{"ports: other IPs", HostPorts(), mkPod("p", port("10.0.0.1", 8080, "")), []*v1.Pod{mkPod("a", port("10.0.0.2", 8080, ""))}, ""},
		{"ports: wildcard vs IP", HostPorts(), mkPod("p", port("10.0.0.1", 8080, "")), []*v1.Pod{mkPod("a", port("0.0.0.0", 8080, ""))}, "NodePorts"},
		{"ports: host network holds container ports", HostPorts(), mkPod("p", port("", 9090, "")), []*v1.Pod{mkPod("a", hostNet(9090))}, "NodePorts"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := tt.admitter.Admit(context.Background(), Attributes{Pod: tt.pod, Node: n, Pods: tt.existing})
			if err != nil {
				t.Fatal(err)
			}
			if r.Admit != (tt.wantReason == "") || r.Reason != tt.wantReason {
				t.Errorf("got %+v, want reason %q", r, tt.wantReason)
			}
			if !r.Admit && r.Message == "" {
				t.Error("rejection without a message")
			}
		})
	}
}

type fixed struct {
	name string
	r    Result
	err  error
	hits *int
}

func (f fixed) Name() string { return f.name }
func (f fixed) Admit(context.Context, Attributes) (Result, error) {
	*f.hits++
	return f.r, f.err
}

func TestIsExtendedResourceName(t *testing.T) {
	for name, want := range map[v1.ResourceName]bool{
		"nvidia.com/gpu": true, "test.device/a-b": true, "cpu": false, "kubernetes.io/x": false,
		"hugepages-2Mi": false, "requests.example.com/x": false, "example.com/bad name": false, "a.kubernetes.io/x": false,
	} {
		if got := IsExtendedResourceName(name); got != want {
			t.Errorf("IsExtendedResourceName(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestChain_Admit(t *testing.T) {
	var h1, h2, h3 int
	reg := prometheus.NewRegistry()
	c, err := New(Config{Registerer: reg, Admitters: []Admitter{
		fixed{"first", Result{Admit: true}, nil, &h1},
		fixed{"policy", Result{Reason: "NoLatest", Message: "images must be pinned"}, nil, &h2},
		fixed{"never", Result{Admit: true}, nil, &h3},
	}})
	if err != nil {
		t.Fatal(err)
	}
	r := c.Admit(context.Background(), Attributes{Pod: mkPod("p")})
	if r.Admit || r.Admitter != "policy" || r.Reason != "NoLatest" || !strings.Contains(r.Message, "policy") {
		t.Errorf("result %+v", r)
	}
	if h1 != 1 || h2 != 1 || h3 != 0 {
		t.Errorf("calls %d %d %d: the chain must stop at the first rejection", h1, h2, h3)
	}
	got := metrictest.Counters(t, reg, "wasmlet_admission_results_total")
	want := map[string]float64{"first/admit": 1, "policy/reject": 1}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("counters %v, want %v", got, want)
	}
}

func TestChain_Admit_error(t *testing.T) {
	var h int
	c, _ := New(Config{Admitters: []Admitter{fixed{"broken", Result{Admit: true}, errors.New("boom"), &h}}})
	r := c.Admit(context.Background(), Attributes{Pod: mkPod("p")})
	if r.Admit || r.Reason != "AdmissionError" || r.Admitter != "broken" || !strings.Contains(r.Message, "boom") {
		t.Errorf("result %+v", r)
	}
	if ok := c.Admit(context.Background(), Attributes{}); ok.Admit {
		t.Error("an erroring admitter admitted")
	}
	empty, _ := New(Config{})
	if !empty.Admit(context.Background(), Attributes{Pod: mkPod("p")}).Admit {
		t.Error("an empty chain rejected")
	}
}

// group is a Group answering with fixed decisions.
type group struct {
	decisions []Decision
	hits      *int
}

func (g group) Name() string { return "group" }

// Admit is not what the chain asks of a Group: it fails the pod under the
// group's own name, which the tests below reject.
func (g group) Admit(context.Context, Attributes) (Result, error) {
	return Result{}, errors.New("the chain asked a Group for Admit")
}

func (g group) AdmitEach(context.Context, Attributes) []Decision {
	*g.hits++
	return g.decisions
}

func TestChain_Admit_group(t *testing.T) {
	admit, deny := Result{Admit: true}, Result{Reason: "NoRoot", Message: "runs as root"}
	tests := []struct {
		name        string
		decisions   []Decision
		wantAdmit   bool
		wantResult  Result // Admitter, Reason and a substring of Message
		wantNever   int    // calls of the admitter after the group
		wantCounter map[string]float64
	}{
		{"members admit", []Decision{{"a", admit, nil}, {"b", admit, nil}}, true, Result{}, 1,
			map[string]float64{"first/admit": 1, "a/admit": 1, "b/admit": 1, "never/admit": 1}},
		{"no members", nil, true, Result{}, 1,
			map[string]float64{"first/admit": 1, "never/admit": 1}},
		{"a member rejects", []Decision{{"a", admit, nil}, {"b", deny, nil}}, false, Result{Admitter: "b", Reason: "NoRoot", Message: "admitter b: runs as root"}, 0,
			map[string]float64{"first/admit": 1, "a/admit": 1, "b/reject": 1}},
		{"a member fails", []Decision{{"a", Result{}, errors.New("trap")}}, false, Result{Admitter: "a", Reason: "AdmissionError", Message: "admitter a failed: trap"}, 0,
			map[string]float64{"first/admit": 1, "a/error": 1}},
		{"a rejection without reason", []Decision{{"a", Result{Message: "no"}, nil}}, false, Result{Admitter: "a", Reason: "Rejected", Message: "admitter a: no"}, 0,
			map[string]float64{"first/admit": 1, "a/reject": 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var h1, hg, h3 int
			reg := prometheus.NewRegistry()
			c, err := New(Config{Registerer: reg, Admitters: []Admitter{
				fixed{"first", admit, nil, &h1},
				group{tt.decisions, &hg},
				fixed{"never", admit, nil, &h3},
			}})
			if err != nil {
				t.Fatal(err)
			}
			r := c.Admit(context.Background(), Attributes{Pod: mkPod("p")})
			if r.Admit != tt.wantAdmit || r.Admitter != tt.wantResult.Admitter || r.Reason != tt.wantResult.Reason || !strings.Contains(r.Message, tt.wantResult.Message) {
				t.Errorf("result %+v, want admit %v and %+v", r, tt.wantAdmit, tt.wantResult)
			}
			if h1 != 1 || hg != 1 || h3 != tt.wantNever {
				t.Errorf("calls %d %d %d, want 1 1 %d", h1, hg, h3, tt.wantNever)
			}
			if got := metrictest.Counters(t, reg, "wasmlet_admission_results_total"); fmt.Sprint(got) != fmt.Sprint(tt.wantCounter) {
				t.Errorf("counters %v, want %v", got, tt.wantCounter)
			}
		})
	}
}

func BenchmarkChain_Admit_builtins100Pods(b *testing.B) {
	c, _ := New(Config{Admitters: Builtins(0)})
	n := node("64", "256Gi", 110)
	var pods []*v1.Pod
	for i := range 100 {
		pods = append(pods, mkPod(fmt.Sprint(i), requests("100m", "64Mi"), port("", int32(8000+i), "")))
	}
	p := mkPod("new", requests("100m", "64Mi"), port("", 9999, ""))
	ctx := context.Background()
	for b.Loop() {
		if !c.Admit(ctx, Attributes{Pod: p, Node: n, Pods: pods}).Admit {
			b.Fatal("rejected")
		}
	}
}
