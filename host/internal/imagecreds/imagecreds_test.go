package imagecreds

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

type fakeObjects struct {
	secrets map[string]*v1.Secret
	sas     map[string]*v1.ServiceAccount
}

func (f fakeObjects) Secret(_ context.Context, ns, name string) (*v1.Secret, error) {
	if s, ok := f.secrets[ns+"/"+name]; ok {
		return s, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "secrets"}, name)
}

func (f fakeObjects) ServiceAccount(_ context.Context, ns, name string) (*v1.ServiceAccount, error) {
	if s, ok := f.sas[ns+"/"+name]; ok {
		return s, nil
	}
	return nil, apierrors.NewForbidden(schema.GroupResource{Resource: "serviceaccounts"}, name, nil)
}

func pullSecret(name, registry, user string) *v1.Secret {
	return &v1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: name},
		Type:       v1.SecretTypeDockerConfigJson,
		Data:       map[string][]byte{v1.DockerConfigJsonKey: []byte(`{"auths":{"` + registry + `":{"auth":"` + b64(user+":pw") + `"}}}`)},
	}
}

func TestResolver_Credentials(t *testing.T) {
	objs := fakeObjects{
		secrets: map[string]*v1.Secret{
			"team/broad":  pullSecret("broad", "registry.example.com", "broad"),
			"team/narrow": pullSecret("narrow", "registry.example.com/team", "narrow"),
			"team/sa":     pullSecret("sa", "registry.example.com", "sa"),
			"team/other":  pullSecret("other", "quay.io", "other"),
			"team/opaque": {ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "opaque"}, Type: v1.SecretTypeOpaque},
		},
		sas: map[string]*v1.ServiceAccount{
			"team/builder": {ImagePullSecrets: []v1.LocalObjectReference{{Name: "sa"}, {Name: "broad"}}},
		},
	}
	dir := t.TempDir()
	nodeCfg := filepath.Join(dir, "config.json")
	os.WriteFile(nodeCfg, []byte(`{"auths":{"registry.example.com":{"username":"node","password":"pw"}}}`), 0o600)
	r, err := New(Config{Secrets: objs, ServiceAccounts: objs, DockerConfig: nodeCfg})
	if err != nil {
		t.Fatal(err)
	}
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "web"}, Spec: v1.PodSpec{
		ServiceAccountName: "builder",
		ImagePullSecrets:   []v1.LocalObjectReference{{Name: "broad"}, {Name: "missing"}, {Name: "opaque"}, {Name: "narrow"}, {Name: "other"}},
	}}
	auths, err := r.Credentials(context.Background(), pod, "registry.example.com/team/app:1.0")
	var users []string
	for _, a := range auths {
		users = append(users, a.Username)
	}
	// The pod's and its ServiceAccount's secrets as one keyring (the
	// longest key first), then the node's file.
	if got, want := strings.Join(users, ","), "narrow,broad,sa,node"; got != want {
		t.Errorf("users = %s, want %s", got, want)
	}
	if err == nil || !strings.Contains(err.Error(), "image pull secret team/missing") || !strings.Contains(err.Error(), "secret team/opaque: type") {
		t.Errorf("error %v: want it to name the missing and the opaque secret", err)
	}

	// A ServiceAccount the node may not read adds nothing and is no error.
	pod.Spec.ServiceAccountName, pod.Spec.ImagePullSecrets = "default", nil
	auths, err = r.Credentials(context.Background(), pod, "registry.example.com/app")
	if err != nil || len(auths) != 1 || auths[0].Username != "node" {
		t.Errorf("Credentials = %v, %v; want the node's only", auths, err)
	}
	if _, err := New(Config{DockerConfig: filepath.Join(dir, "absent.json")}); err == nil || !strings.Contains(err.Error(), "absent.json") {
		t.Errorf("New with a missing file: %v", err)
	}
}
