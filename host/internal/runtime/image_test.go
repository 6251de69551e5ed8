package runtime

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	v1 "k8s.io/api/core/v1"
	cri "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/wasmlet/wasmlet/host/internal/container"
)

// fixedCredentials gives the same credentials for every pull.
type fixedCredentials struct {
	auths    []*runtimeapi.AuthConfig
	problems error
}

func (f fixedCredentials) Credentials(context.Context, *v1.Pod, string) ([]*runtimeapi.AuthConfig, error) {
	return f.auths, f.problems
}

// pullRecorder records the user name of every PullImage.
type pullRecorder struct {
	cri.ImageManagerService
	mu    sync.Mutex
	users []string
}

func (r *pullRecorder) PullImage(ctx context.Context, image *runtimeapi.ImageSpec, auth *runtimeapi.AuthConfig, sb *runtimeapi.PodSandboxConfig) (string, error) {
	r.mu.Lock()
	user := "<anonymous>"
	if auth != nil {
		user = auth.Username
	}
	r.users = append(r.users, user)
	r.mu.Unlock()
	return r.ImageManagerService.PullImage(ctx, image, auth, sb)
}

func TestManager_ensureImage_Credentials(t *testing.T) {
	for _, tc := range []struct {
		name      string
		creds     fixedCredentials
		refusals  int // PullImage errors injected first
		wantUsers string
		wantErr   []string // in the message; none: the pull succeeds
	}{
		{"anonymous", fixedCredentials{}, 0, "<anonymous>", nil},
		{"first accepted", fixedCredentials{auths: []*runtimeapi.AuthConfig{{Username: "a"}, {Username: "b"}}}, 0, "a", nil},
		{"second accepted", fixedCredentials{auths: []*runtimeapi.AuthConfig{{Username: "a"}, {Username: "b"}}}, 1, "a,b", nil},
		{"all refused", fixedCredentials{auths: []*runtimeapi.AuthConfig{{Username: "a"}, {Username: "b"}}}, 2, "a,b", []string{"refusal 1", "refusal 2"}},
		{"refused with problems", fixedCredentials{auths: []*runtimeapi.AuthConfig{{Username: "a"}}, problems: errors.New("secret team/gone not found")}, 1, "a", []string{"refusal 1", "secret team/gone not found"}},
		{"anonymous refused with problems", fixedCredentials{problems: errors.New("credential provider ecr: exit status 1")}, 1, "<anonymous>", []string{"refusal 1", "credential provider ecr"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &pullRecorder{}
			m, f := newTestManagerWith(t, func(c *Config) {
				c.Credentials = tc.creds
				c.Instrument = func(rs cri.RuntimeService, is cri.ImageManagerService) (cri.RuntimeService, cri.ImageManagerService) {
					rec.ImageManagerService = is
					return rs, rec
				}
			})
			for i := 1; i <= tc.refusals; i++ {
				f.ImageService.InjectError("PullImage", errors.New("refusal "+string(rune('0'+i))))
			}
			pod := testPod("creds", v1.RestartPolicyAlways, "app")
			c := &pod.Spec.Containers[0]
			c.ImagePullPolicy = v1.PullAlways
			_, reason, msg := m.ensureImage(context.Background(), pod, c, nil, nil)
			if got := strings.Join(rec.users, ","); got != tc.wantUsers {
				t.Errorf("pulls as %s, want %s", got, tc.wantUsers)
			}
			if len(tc.wantErr) == 0 {
				if reason != nil {
					t.Fatalf("%v: %s", reason, msg)
				}
				return
			}
			if reason != container.ErrImagePull {
				t.Fatalf("reason %v, want ErrImagePull", reason)
			}
			for _, w := range tc.wantErr {
				if !strings.Contains(msg, w) {
					t.Errorf("message %q lacks %q", msg, w)
				}
			}
		})
	}
}
