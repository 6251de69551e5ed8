package podenv

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// envPod is a pod in "default" with one container.
func envPod(c v1.Container) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", UID: "u1"},
		Spec:       v1.PodSpec{NodeName: "node-1", Containers: []v1.Container{c}},
	}
}

func testObjects() *fakeSource {
	return &fakeSource{
		configMaps: map[string]*v1.ConfigMap{
			"default/cm":    configMap("default", "cm", map[string]string{"data-1": "value-1", "data-2": "value-2", "SHARED": "from-cm"}),
			"default/other": configMap("default", "other", map[string]string{"SHARED": "from-other"}),
		},
		secrets: map[string]*v1.Secret{
			"default/s": secret("default", "s", map[string]string{"data-1": "secret-1", "pw": "hunter2"}),
		},
	}
}

func fieldRef(path string) *v1.EnvVarSource {
	return &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{APIVersion: "v1", FieldPath: path}}
}

func cmKey(name, key string, optional bool) *v1.EnvVarSource {
	return &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{
		LocalObjectReference: v1.LocalObjectReference{Name: name}, Key: key, Optional: ptr(optional)}}
}

func secretKey(name, key string, optional bool) *v1.EnvVarSource {
	return &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{
		LocalObjectReference: v1.LocalObjectReference{Name: name}, Key: key, Optional: ptr(optional)}}
}

func cmFrom(name, prefix string, optional bool) v1.EnvFromSource {
	return v1.EnvFromSource{Prefix: prefix, ConfigMapRef: &v1.ConfigMapEnvSource{
		LocalObjectReference: v1.LocalObjectReference{Name: name}, Optional: ptr(optional)}}
}

func secretFrom(name, prefix string, optional bool) v1.EnvFromSource {
	return v1.EnvFromSource{Prefix: prefix, SecretRef: &v1.SecretEnvSource{
		LocalObjectReference: v1.LocalObjectReference{Name: name}, Optional: ptr(optional)}}
}

func TestEnvValues(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    v1.Container
		want []EnvVar
		err  string
	}{
		{name: "plain values", c: v1.Container{Env: []v1.EnvVar{{Name: "A", Value: "a"}, {Name: "EMPTY"}}},
			want: []EnvVar{{"A", "a"}, {"EMPTY", ""}}},
		{name: "composition", c: v1.Container{Env: []v1.EnvVar{
			{Name: "FOO", Value: "foo-value"}, {Name: "BAR", Value: "bar-value"},
			{Name: "FOOBAR", Value: "$(FOO);;$(BAR)"},
			{Name: "LATER", Value: "$(AFTER)"}, {Name: "AFTER", Value: "x"},
			{Name: "ESC", Value: "$$(FOO) $$ $(NOPE) $"},
		}}, want: []EnvVar{
			{"FOO", "foo-value"}, {"BAR", "bar-value"}, {"FOOBAR", "foo-value;;bar-value"},
			{"LATER", "$(AFTER)"}, {"AFTER", "x"}, {"ESC", "$(FOO) $ $(NOPE) $"},
		}},
		{name: "fieldRefs", c: v1.Container{Env: []v1.EnvVar{
			{Name: "NAME", ValueFrom: fieldRef("metadata.name")},
			{Name: "NS", ValueFrom: fieldRef("metadata.namespace")},
			{Name: "POD_IP", ValueFrom: fieldRef("status.podIP")},
			{Name: "POD_IPS", ValueFrom: fieldRef("status.podIPs")},
			{Name: "HOST_IP", ValueFrom: fieldRef("status.hostIP")},
			{Name: "HOST_IPS", ValueFrom: fieldRef("status.hostIPs")},
			{Name: "NODE", ValueFrom: fieldRef("spec.nodeName")},
			{Name: "URL", Value: "http://$(POD_IP):80/$(NAME)"},
		}}, want: []EnvVar{
			{"NAME", "p"}, {"NS", "default"}, {"POD_IP", "10.0.0.5"}, {"POD_IPS", "10.0.0.5,fd00::5"},
			{"HOST_IP", "192.168.1.2"}, {"HOST_IPS", "192.168.1.2,fd00::2"}, {"NODE", "node-1"},
			{"URL", "http://10.0.0.5:80/p"},
		}},
		{name: "fieldRef without apiVersion", c: v1.Container{Env: []v1.EnvVar{
			{Name: "UID", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.uid"}}},
		}}, want: []EnvVar{{"UID", "u1"}}},
		{name: "fieldRef bad apiVersion", c: v1.Container{Env: []v1.EnvVar{
			{Name: "UID", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{APIVersion: "v2", FieldPath: "metadata.uid"}}},
		}}, err: "unsupported pod version: v2"},
		{name: "fieldRef unknown", c: v1.Container{Env: []v1.EnvVar{{Name: "X", ValueFrom: fieldRef("spec.bogus")}}},
			err: "field label not supported: spec.bogus"},
		{name: "resourceFieldRef", c: v1.Container{
			Resources: v1.ResourceRequirements{Limits: rl("memory", "64Mi")},
			Env: []v1.EnvVar{
				{Name: "MEM", ValueFrom: &v1.EnvVarSource{ResourceFieldRef: &v1.ResourceFieldSelector{
					Resource: "limits.memory", Divisor: resource.MustParse("1Mi")}}},
				{Name: "CPU", ValueFrom: &v1.EnvVarSource{ResourceFieldRef: &v1.ResourceFieldSelector{
					Resource: "limits.cpu", Divisor: resource.MustParse("1m")}}},
			}}, want: []EnvVar{{"MEM", "64"}, {"CPU", "3500"}}},
		{name: "configMapKeyRef", c: v1.Container{Env: []v1.EnvVar{{Name: "V", ValueFrom: cmKey("cm", "data-1", false)}}},
			want: []EnvVar{{"V", "value-1"}}},
		{name: "configMapKeyRef missing", c: v1.Container{Env: []v1.EnvVar{{Name: "V", ValueFrom: cmKey("nope", "k", false)}}},
			err: `configmap "nope" not found`},
		{name: "configMapKeyRef missing optional", c: v1.Container{Env: []v1.EnvVar{
			{Name: "V", ValueFrom: cmKey("nope", "k", true)}, {Name: "W", Value: "w"}}},
			want: []EnvVar{{"W", "w"}}},
		{name: "configMapKeyRef missing key", c: v1.Container{Env: []v1.EnvVar{{Name: "V", ValueFrom: cmKey("cm", "bar", false)}}},
			err: "couldn't find key bar in ConfigMap default/cm"},
		{name: "configMapKeyRef missing key optional", c: v1.Container{Env: []v1.EnvVar{{Name: "V", ValueFrom: cmKey("cm", "bar", true)}}},
			want: []EnvVar{}},
		{name: "secretKeyRef", c: v1.Container{Env: []v1.EnvVar{{Name: "PW", ValueFrom: secretKey("s", "pw", false)}}},
			want: []EnvVar{{"PW", "hunter2"}}},
		{name: "secretKeyRef missing", c: v1.Container{Env: []v1.EnvVar{{Name: "PW", ValueFrom: secretKey("nope", "pw", false)}}},
			err: `secret "nope" not found`},
		{name: "secretKeyRef missing optional", c: v1.Container{Env: []v1.EnvVar{{Name: "PW", ValueFrom: secretKey("nope", "pw", true)}}},
			want: []EnvVar{}},
		{name: "secretKeyRef missing key", c: v1.Container{Env: []v1.EnvVar{{Name: "PW", ValueFrom: secretKey("s", "k", false)}}},
			err: "couldn't find key k in Secret default/s"},
		{name: "secretKeyRef missing key optional", c: v1.Container{Env: []v1.EnvVar{{Name: "PW", ValueFrom: secretKey("s", "k", true)}}},
			want: []EnvVar{}},
		{name: "missing optional keeps envFrom value", c: v1.Container{
			EnvFrom: []v1.EnvFromSource{cmFrom("cm", "", false)},
			Env:     []v1.EnvVar{{Name: "SHARED", ValueFrom: cmKey("cm", "nokey", true)}}},
			want: []EnvVar{{"SHARED", "from-cm"}, {"data-1", "value-1"}, {"data-2", "value-2"}}},
		{name: "envFrom with prefix", c: v1.Container{EnvFrom: []v1.EnvFromSource{
			cmFrom("cm", "", false), cmFrom("cm", "1-", false), cmFrom("cm", "#@!", false), secretFrom("s", "S_", false),
		}}, want: []EnvVar{
			{"SHARED", "from-cm"}, {"data-1", "value-1"}, {"data-2", "value-2"},
			{"1-SHARED", "from-cm"}, {"1-data-1", "value-1"}, {"1-data-2", "value-2"},
			{"#@!SHARED", "from-cm"}, {"#@!data-1", "value-1"}, {"#@!data-2", "value-2"},
			{"S_data-1", "secret-1"}, {"S_pw", "hunter2"},
		}},
		{name: "envFrom later source wins", c: v1.Container{EnvFrom: []v1.EnvFromSource{
			cmFrom("cm", "", false), cmFrom("other", "", false), secretFrom("s", "", false),
		}}, want: []EnvVar{{"SHARED", "from-other"}, {"data-1", "secret-1"}, {"data-2", "value-2"}, {"pw", "hunter2"}}},
		{name: "envFrom optional missing", c: v1.Container{EnvFrom: []v1.EnvFromSource{
			cmFrom("nope", "", true), secretFrom("nope", "", true), cmFrom("other", "", false),
		}}, want: []EnvVar{{"SHARED", "from-other"}}},
		{name: "envFrom configmap missing", c: v1.Container{EnvFrom: []v1.EnvFromSource{cmFrom("nope", "", false)}},
			err: `configmap "nope" not found`},
		{name: "envFrom secret missing", c: v1.Container{EnvFrom: []v1.EnvFromSource{secretFrom("nope", "", false)}},
			err: `secret "nope" not found`},
		{name: "env over envFrom", c: v1.Container{
			EnvFrom: []v1.EnvFromSource{cmFrom("cm", "", false)},
			Env: []v1.EnvVar{
				{Name: "data-1", Value: "env"}, {Name: "COPY", Value: "$(data-2)/$(SHARED)"},
				{Name: "SHARED", ValueFrom: secretKey("s", "pw", false)},
			}},
			want: []EnvVar{{"SHARED", "hunter2"}, {"data-1", "env"}, {"data-2", "value-2"}, {"COPY", "value-2/from-cm"}}},
		{name: "fileKeyRef with no volumes", c: v1.Container{Env: []v1.EnvVar{{Name: "F", ValueFrom: &v1.EnvVarSource{
			FileKeyRef: &v1.FileKeySelector{VolumeName: "v", Path: "p", Key: "k"}}}}},
			err: "env var F: fileKeyRef: this node has no volumes to read env files from"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := New(Config{
				Objects: testObjects(),
				Node:    testNode,
				HostIPs: []string{"192.168.1.2", "fd00::2"},
			})
			c := tc.c
			c.Name = "c"
			pod := envPod(c)
			got, err := r.Env(context.Background(), pod, &pod.Spec.Containers[0], []string{"fd00::5", "10.0.0.5"})
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Fatalf("got %v, %v; want error %q", got, err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got\n%v\nwant\n%v", got, tc.want)
			}
		})
	}
}

func TestEnvObjectErrors(t *testing.T) {
	ctx := context.Background()
	boom := errors.New("boom")
	for _, tc := range []struct {
		name    string
		objects *fakeSource
		nilSrc  bool
		env     v1.EnvVar
		from    *v1.EnvFromSource
		want    string
		is      func(error) bool
	}{
		{name: "not found is NotFound", objects: testObjects(), env: v1.EnvVar{Name: "V", ValueFrom: cmKey("nope", "k", false)},
			want: `configmap "nope" not found`, is: apierrors.IsNotFound},
		{name: "secret not found is NotFound", objects: testObjects(), env: v1.EnvVar{Name: "V", ValueFrom: secretKey("nope", "k", false)},
			want: `secret "nope" not found`, is: apierrors.IsNotFound},
		{name: "source error wrapped", objects: &fakeSource{err: boom}, env: v1.EnvVar{Name: "V", ValueFrom: cmKey("cm", "k", false)},
			want: "couldn't get configMap default/cm: boom", is: func(err error) bool { return errors.Is(err, boom) }},
		{name: "source error not hidden by optional", objects: &fakeSource{err: boom}, env: v1.EnvVar{Name: "V", ValueFrom: secretKey("s", "k", true)},
			want: "couldn't get secret default/s: boom", is: func(err error) bool { return errors.Is(err, boom) }},
		{name: "envFrom source error", objects: &fakeSource{err: boom}, from: ptr(cmFrom("cm", "", true)),
			want: "couldn't get configMap default/cm: boom"},
		{name: "no source", nilSrc: true, env: v1.EnvVar{Name: "V", ValueFrom: cmKey("cm", "k", true)},
			want: "couldn't get configMap default/cm: the node has no source of ConfigMaps and Secrets"},
		{name: "no source secret", nilSrc: true, env: v1.EnvVar{Name: "V", ValueFrom: secretKey("s", "k", false)},
			want: "couldn't get secret default/s: the node has no source of ConfigMaps and Secrets"},
		{name: "no source envFrom", nilSrc: true, from: ptr(secretFrom("s", "", true)),
			want: "couldn't get secret default/s: the node has no source of ConfigMaps and Secrets"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config{}
			if !tc.nilSrc {
				cfg.Objects = tc.objects
			}
			c := v1.Container{Name: "c"}
			if tc.from != nil {
				c.EnvFrom = []v1.EnvFromSource{*tc.from}
			} else {
				c.Env = []v1.EnvVar{tc.env}
			}
			pod := envPod(c)
			_, err := New(cfg).Env(ctx, pod, &pod.Spec.Containers[0], nil)
			if err == nil || err.Error() != tc.want {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
			if tc.is != nil && !tc.is(err) {
				t.Errorf("%v: wrong error kind", err)
			}
		})
	}
}

func TestEnvFetchesEachObjectOnce(t *testing.T) {
	objs := testObjects()
	c := v1.Container{Name: "c",
		EnvFrom: []v1.EnvFromSource{cmFrom("cm", "", false), cmFrom("cm", "P_", false)},
		Env: []v1.EnvVar{
			{Name: "A", ValueFrom: cmKey("cm", "data-1", false)},
			{Name: "B", ValueFrom: secretKey("s", "pw", false)},
			{Name: "C", ValueFrom: secretKey("s", "data-1", false)},
		}}
	pod := envPod(c)
	if _, err := New(Config{Objects: objs}).Env(context.Background(), pod, &pod.Spec.Containers[0], nil); err != nil {
		t.Fatal(err)
	}
	if objs.calls != 2 {
		t.Errorf("%d lookups, want 2", objs.calls)
	}
}

func TestEnvResourceFieldRef(t *testing.T) {
	ctx := context.Background()
	mem := &v1.EnvVarSource{ResourceFieldRef: &v1.ResourceFieldSelector{Resource: "limits.memory", Divisor: resource.MustParse("1Mi")}}
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default"},
		Spec: v1.PodSpec{
			InitContainers: []v1.Container{{Name: "init", Resources: v1.ResourceRequirements{Limits: rl("memory", "32Mi")}}},
			Containers: []v1.Container{
				{Name: "a", Env: []v1.EnvVar{
					{Name: "MINE", ValueFrom: mem},
					{Name: "OF_B", ValueFrom: &v1.EnvVarSource{ResourceFieldRef: &v1.ResourceFieldSelector{
						ContainerName: "b", Resource: "limits.memory", Divisor: resource.MustParse("1Mi")}}},
					{Name: "OF_INIT", ValueFrom: &v1.EnvVarSource{ResourceFieldRef: &v1.ResourceFieldSelector{
						ContainerName: "init", Resource: "limits.memory", Divisor: resource.MustParse("1Mi")}}},
				}},
				{Name: "b", Resources: v1.ResourceRequirements{Limits: rl("memory", "16Mi")}},
			},
		},
	}
	r := New(Config{Node: testNode})
	got, err := r.Env(ctx, pod, &pod.Spec.Containers[0], nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []EnvVar{{"MINE", "8192"}, {"OF_B", "16"}, {"OF_INIT", "32"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}

	for _, cfg := range []Config{{}, {Node: func() *v1.Node { return nil }}} {
		_, err := New(cfg).Env(ctx, pod, &pod.Spec.Containers[0], nil)
		if err == nil || err.Error() != "failed to find node object, expected a node" {
			t.Errorf("no node: got %v", err)
		}
	}

	pod.Spec.Containers[0].Env = []v1.EnvVar{{Name: "X", ValueFrom: &v1.EnvVarSource{ResourceFieldRef: &v1.ResourceFieldSelector{
		ContainerName: "zz", Resource: "limits.memory"}}}}
	if _, err := r.Env(ctx, pod, &pod.Spec.Containers[0], nil); err == nil || err.Error() != "container zz not found" {
		t.Errorf("unknown container: got %v", err)
	}
}

// clusterServices are the master service, two services of ns1 (one with
// two ports), a headless one, and one in another namespace.
func clusterServices() *fakeServices {
	return &fakeServices{list: []*v1.Service{
		service("default", "kubernetes", "10.96.0.1", v1.ServicePort{Name: "https", Port: 443, Protocol: v1.ProtocolTCP}),
		service("ns1", "web", "10.96.0.20",
			v1.ServicePort{Name: "http", Port: 80, Protocol: v1.ProtocolTCP},
			v1.ServicePort{Name: "metrics", Port: 9090, Protocol: v1.ProtocolTCP}),
		service("ns1", "headless", v1.ClusterIPNone, v1.ServicePort{Port: 80}),
		service("ns2", "elsewhere", "10.96.0.30", v1.ServicePort{Port: 80}),
	}}
}

var masterVars = []EnvVar{
	{"KUBERNETES_SERVICE_HOST", "10.96.0.1"},
	{"KUBERNETES_SERVICE_PORT", "443"},
	{"KUBERNETES_SERVICE_PORT_HTTPS", "443"},
	{"KUBERNETES_PORT", "tcp://10.96.0.1:443"},
	{"KUBERNETES_PORT_443_TCP", "tcp://10.96.0.1:443"},
	{"KUBERNETES_PORT_443_TCP_PROTO", "tcp"},
	{"KUBERNETES_PORT_443_TCP_PORT", "443"},
	{"KUBERNETES_PORT_443_TCP_ADDR", "10.96.0.1"},
}

var webVars = []EnvVar{
	{"WEB_SERVICE_HOST", "10.96.0.20"},
	{"WEB_SERVICE_PORT", "80"},
	{"WEB_SERVICE_PORT_HTTP", "80"},
	{"WEB_SERVICE_PORT_METRICS", "9090"},
	{"WEB_PORT", "tcp://10.96.0.20:80"},
	{"WEB_PORT_80_TCP", "tcp://10.96.0.20:80"},
	{"WEB_PORT_80_TCP_PROTO", "tcp"},
	{"WEB_PORT_80_TCP_PORT", "80"},
	{"WEB_PORT_80_TCP_ADDR", "10.96.0.20"},
	{"WEB_PORT_9090_TCP", "tcp://10.96.0.20:9090"},
	{"WEB_PORT_9090_TCP_PROTO", "tcp"},
	{"WEB_PORT_9090_TCP_PORT", "9090"},
	{"WEB_PORT_9090_TCP_ADDR", "10.96.0.20"},
}

func concat(lists ...[]EnvVar) []EnvVar {
	var out []EnvVar
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}

func TestEnvServices(t *testing.T) {
	ns1Pod := func(links *bool, env ...v1.EnvVar) *v1.Pod {
		return &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns1"},
			Spec: v1.PodSpec{EnableServiceLinks: links,
				Containers: []v1.Container{{Name: "c", Env: env}}},
		}
	}
	for _, tc := range []struct {
		name     string
		services *fakeServices
		nilSvcs  bool
		pod      *v1.Pod
		want     []EnvVar
		err      string
	}{
		{name: "links default on", services: clusterServices(), pod: ns1Pod(nil),
			want: concat(masterVars, webVars)},
		{name: "links on", services: clusterServices(), pod: ns1Pod(ptr(true)),
			want: concat(masterVars, webVars)},
		{name: "links off keeps master", services: clusterServices(), pod: ns1Pod(ptr(false)),
			want: masterVars},
		{name: "no services source", nilSvcs: true, pod: ns1Pod(nil, v1.EnvVar{Name: "A", Value: "$(WEB_SERVICE_HOST)"}),
			want: []EnvVar{{"A", "$(WEB_SERVICE_HOST)"}}},
		{name: "env over services, references to services", services: clusterServices(), pod: ns1Pod(nil,
			v1.EnvVar{Name: "WEB_SERVICE_PORT", Value: "8080"},
			v1.EnvVar{Name: "URL", Value: "http://$(WEB_SERVICE_HOST):$(WEB_SERVICE_PORT)"},
			v1.EnvVar{Name: "API", Value: "$(KUBERNETES_SERVICE_HOST):$(KUBERNETES_SERVICE_PORT)"},
		), want: concat(
			[]EnvVar{{"WEB_SERVICE_PORT", "8080"}, {"URL", "http://10.96.0.20:8080"}, {"API", "10.96.0.1:443"}},
			masterVars, webVars[:1], webVars[2:],
		)},
		{name: "links off: no reference to namespace services", services: clusterServices(), pod: ns1Pod(ptr(false),
			v1.EnvVar{Name: "URL", Value: "$(WEB_SERVICE_HOST)"}),
			want: concat([]EnvVar{{"URL", "$(WEB_SERVICE_HOST)"}}, masterVars)},
		{name: "namespace service named kubernetes wins", services: &fakeServices{list: append(clusterServices().list,
			service("ns1", "kubernetes", "10.96.0.99", v1.ServicePort{Port: 80}))}, pod: ns1Pod(nil),
			want: concat([]EnvVar{
				{"KUBERNETES_SERVICE_HOST", "10.96.0.99"},
				{"KUBERNETES_SERVICE_PORT", "80"},
				{"KUBERNETES_PORT", "tcp://10.96.0.99:80"},
				{"KUBERNETES_PORT_80_TCP", "tcp://10.96.0.99:80"},
				{"KUBERNETES_PORT_80_TCP_PROTO", "tcp"},
				{"KUBERNETES_PORT_80_TCP_PORT", "80"},
				{"KUBERNETES_PORT_80_TCP_ADDR", "10.96.0.99"},
			}, webVars)},
		{name: "kubernetes outside default is not the master", services: &fakeServices{list: []*v1.Service{
			service("ns2", "kubernetes", "10.96.0.99", v1.ServicePort{Port: 80})}}, pod: ns1Pod(ptr(false)),
			want: nil},
		{name: "services error", services: &fakeServices{err: errors.New("not synced")}, pod: ns1Pod(nil),
			err: "failed to list services when setting up env vars: not synced"},
		{name: "services error, static pod", services: &fakeServices{err: errors.New("not synced")}, pod: func() *v1.Pod {
			p := ns1Pod(nil, v1.EnvVar{Name: "A", Value: "a"})
			p.Annotations = map[string]string{"kubernetes.io/config.source": "file"}
			return p
		}(), want: []EnvVar{{"A", "a"}}},
		{name: "services error, api pod", services: &fakeServices{err: errors.New("not synced")}, pod: func() *v1.Pod {
			p := ns1Pod(nil)
			p.Annotations = map[string]string{"kubernetes.io/config.source": "api"}
			return p
		}(), err: "failed to list services when setting up env vars: not synced"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config{}
			if !tc.nilSvcs {
				cfg.Services = tc.services
			}
			got, err := New(cfg).Env(context.Background(), tc.pod, &tc.pod.Spec.Containers[0], nil)
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Fatalf("got %v; want error %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) == 0 && len(tc.want) == 0 {
				return
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got\n%s\nwant\n%s", fmtEnv(got), fmtEnv(tc.want))
			}
		})
	}
}

func TestEnvPrecedence(t *testing.T) {
	// A name set by a service, by envFrom and by env: env wins; one set
	// by a service and envFrom: envFrom wins; values expand against
	// envFrom before services.
	objs := &fakeSource{configMaps: map[string]*v1.ConfigMap{
		"ns1/cm": configMap("ns1", "cm", map[string]string{
			"WEB_SERVICE_HOST": "from-cm", "WEB_SERVICE_PORT": "from-cm", "ONLY_CM": "cm"}),
	}}
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns1"},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c",
			EnvFrom: []v1.EnvFromSource{cmFrom("cm", "", false)},
			Env: []v1.EnvVar{
				{Name: "REF", Value: "$(WEB_SERVICE_HOST)|$(WEB_PORT)|$(ONLY_CM)"},
				{Name: "WEB_SERVICE_HOST", Value: "from-env"},
				{Name: "REF2", Value: "$(WEB_SERVICE_HOST)"},
			}}}},
	}
	got, err := New(Config{Objects: objs, Services: clusterServices()}).Env(context.Background(), pod, &pod.Spec.Containers[0], nil)
	if err != nil {
		t.Fatal(err)
	}
	m := envMap(got)
	for k, want := range map[string]string{
		"WEB_SERVICE_HOST":        "from-env",
		"WEB_SERVICE_PORT":        "from-cm",
		"ONLY_CM":                 "cm",
		"REF":                     "from-cm|tcp://10.96.0.20:80|cm",
		"REF2":                    "from-env",
		"WEB_SERVICE_PORT_HTTP":   "80",
		"KUBERNETES_SERVICE_HOST": "10.96.0.1",
	} {
		if m[k] != want {
			t.Errorf("%s = %q, want %q", k, m[k], want)
		}
	}
	seen := map[string]bool{}
	for _, e := range got {
		if seen[e.Name] {
			t.Errorf("%s listed twice", e.Name)
		}
		seen[e.Name] = true
	}
}

func TestEnvSecretStringDataAndOddKeys(t *testing.T) {
	s := secret("default", "s", map[string]string{"a": "data", "b": "data"})
	s.StringData = map[string]string{"b": "string"}
	objs := &fakeSource{
		secrets: map[string]*v1.Secret{"default/s": s},
		configMaps: map[string]*v1.ConfigMap{"default/odd": configMap("default", "odd", map[string]string{
			"": "empty", "a=b": "eq", "nul\x00": "nul", "ok": "ok"})},
	}
	c := v1.Container{Name: "c", EnvFrom: []v1.EnvFromSource{secretFrom("s", "", false), cmFrom("odd", "", false)}}
	pod := envPod(c)
	got, err := New(Config{Objects: objs}).Env(context.Background(), pod, &pod.Spec.Containers[0], nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []EnvVar{{"a", "data"}, {"b", "string"}, {"ok", "ok"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

func fmtEnv(env []EnvVar) string {
	var b strings.Builder
	for _, e := range env {
		b.WriteString(e.Name + "=" + e.Value + "\n")
	}
	return b.String()
}

func TestEnvHostNetworkPodIP(t *testing.T) {
	r := New(Config{HostIPs: []string{"192.0.2.7"}})
	pod := &v1.Pod{Spec: v1.PodSpec{HostNetwork: true}}
	c := &v1.Container{Name: "c", Env: []v1.EnvVar{
		{Name: "POD_IP", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
		{Name: "HOST_IP", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "status.hostIP"}}},
	}}
	env, err := r.Env(context.Background(), pod, c, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(env) != 2 || env[0].Value != "192.0.2.7" || env[1].Value != "192.0.2.7" {
		t.Errorf("host-network env %v: want the node's IP as pod and host IP", env)
	}
}
