package podenv

import (
	"context"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// fakeSource is an objects.Source over maps keyed "namespace/name".
type fakeSource struct {
	configMaps map[string]*v1.ConfigMap
	secrets    map[string]*v1.Secret
	err        error // returned by every lookup when set
	calls      int
}

func (f *fakeSource) RegisterPod(*v1.Pod)   {}
func (f *fakeSource) UnregisterPod(*v1.Pod) {}

func (f *fakeSource) ConfigMap(_ context.Context, ns, name string) (*v1.ConfigMap, error) {
	f.calls++
	if f.err != nil {
		return nil, f.err
	}
	if cm, ok := f.configMaps[ns+"/"+name]; ok {
		return cm, nil
	}
	return nil, apierrors.NewNotFound(v1.Resource("configmaps"), name)
}

func (f *fakeSource) Secret(_ context.Context, ns, name string) (*v1.Secret, error) {
	f.calls++
	if f.err != nil {
		return nil, f.err
	}
	if s, ok := f.secrets[ns+"/"+name]; ok {
		return s, nil
	}
	return nil, apierrors.NewNotFound(v1.Resource("secrets"), name)
}

// fakeServices is an objects.Services over a list.
type fakeServices struct {
	list []*v1.Service
	err  error
}

func (f *fakeServices) Services(ns string) ([]*v1.Service, error) {
	if f.err != nil {
		return nil, f.err
	}
	var out []*v1.Service
	for _, s := range f.list {
		if ns == "" || s.Namespace == ns {
			out = append(out, s)
		}
	}
	return out, nil
}

func configMap(ns, name string, data map[string]string) *v1.ConfigMap {
	return &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: data}
}

func secret(ns, name string, data map[string]string) *v1.Secret {
	s := &v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string][]byte{}}
	for k, v := range data {
		s.Data[k] = []byte(v)
	}
	return s
}

func service(ns, name, ip string, ports ...v1.ServicePort) *v1.Service {
	return &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       v1.ServiceSpec{ClusterIP: ip, Ports: ports},
	}
}

func ptr[T any](v T) *T { return &v }
