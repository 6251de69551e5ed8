package objects

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// localRereadInterval is how often, at most, a Local looks at its
// directory again.
const localRereadInterval = 2 * time.Second

// Local is the Source, Tokens and Services of a standalone node (no API
// server): ConfigMaps and Secrets come from a directory of manifests (see
// the package doc), there are no service-account tokens and no Services.
type Local struct {
	dir      string
	log      hclog.Logger
	interval time.Duration    // between looks at dir; tests set 0
	now      func() time.Time // tests may replace it

	mu          sync.Mutex
	loaded      bool
	checked     time.Time // when dir was last looked at
	fingerprint string    // of dir's files when last parsed
	objs        map[objectKey]runtime.Object
	reported    map[string]string // problem → its signature, logged once per change
}

var (
	_ Source   = (*Local)(nil)
	_ Tokens   = (*Local)(nil)
	_ Services = (*Local)(nil)
)

// NewLocal returns the Local reading dir ("" for none: every ConfigMap
// and Secret is then missing). Problems with dir's files go to logger
// (nil discards).
func NewLocal(dir string, logger hclog.Logger) *Local {
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	return &Local{dir: dir, log: logger, interval: localRereadInterval, now: time.Now}
}

// RegisterPod does nothing: the directory is read as lookups need it.
func (l *Local) RegisterPod(*v1.Pod) {}

// UnregisterPod does nothing.
func (l *Local) UnregisterPod(*v1.Pod) {}

// ConfigMap returns a copy of the named ConfigMap from the directory, or
// a NotFound error naming it and where it was looked for.
func (l *Local) ConfigMap(_ context.Context, namespace, name string) (*v1.ConfigMap, error) {
	k := objectKey{resConfigMaps, namespace, name}
	obj, err := l.lookup(k)
	return as[*v1.ConfigMap](k, obj, err)
}

// Secret returns a copy of the named Secret, as ConfigMap does.
func (l *Local) Secret(_ context.Context, namespace, name string) (*v1.Secret, error) {
	k := objectKey{resSecrets, namespace, name}
	obj, err := l.lookup(k)
	return as[*v1.Secret](k, obj, err)
}

// Token fails: a standalone node has no API server to issue tokens.
func (l *Local) Token(_ context.Context, req TokenRequest) (Token, error) {
	ns, name := "", ""
	if req.Pod != nil {
		ns, name = req.Pod.Namespace, req.Pod.Name
	}
	return Token{}, fmt.Errorf("service account token for pod %s/%s: this node has no API server (standalone)", ns, name)
}

// ForgetPod does nothing.
func (l *Local) ForgetPod(string) {}

// Services returns none: a standalone node has no Services.
func (l *Local) Services(string) ([]*v1.Service, error) { return nil, nil }

// lookup returns k from the directory (re-read if due), or a NotFound
// error.
func (l *Local) lookup(k objectKey) (runtime.Object, error) {
	if l.dir == "" {
		return nil, notFound(k, fmt.Sprintf(
			"%s not found: this node is standalone (no API server); "+
				"ConfigMaps and Secrets come from --pod-objects-dir, which is not set", k))
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.refreshLocked()
	if obj, ok := l.objs[k]; ok {
		return obj, nil
	}
	return nil, notFound(k, fmt.Sprintf("%s not found in --pod-objects-dir %s (standalone node)", k, l.dir))
}

// notFound is a NotFound API error about k with message.
func notFound(k objectKey, message string) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    http.StatusNotFound,
		Reason:  metav1.StatusReasonNotFound,
		Details: &metav1.StatusDetails{Kind: k.resource, Name: k.name},
		Message: message,
	}}
}
