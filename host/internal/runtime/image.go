package runtime

import (
	"context"
	"fmt"
	"strings"

	"github.com/wasmlet/wasmlet/host/internal/container"
	v1 "k8s.io/api/core/v1"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/client-go/util/flowcontrol"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// pullPolicy defaults an empty policy as the API server would: Always for
// :latest or no tag, else IfNotPresent.
func pullPolicy(c *v1.Container) v1.PullPolicy {
	if c.ImagePullPolicy != "" {
		return c.ImagePullPolicy
	}
	img := c.Image
	if i := strings.LastIndex(img, "@"); i >= 0 {
		return v1.PullIfNotPresent
	}
	if i := strings.LastIndex(img, ":"); i < 0 || strings.Contains(img[i:], "/") || img[i+1:] == "latest" {
		return v1.PullAlways
	}
	return v1.PullIfNotPresent
}

// ensureImage makes the container's image present per its pull policy and
// returns its reference.
func (m *Manager) ensureImage(ctx context.Context, pod *v1.Pod, c *v1.Container, sbConfig *runtimeapi.PodSandboxConfig, backOff *flowcontrol.Backoff) (string, error, string) {
	spec := &runtimeapi.ImageSpec{Image: c.Image, UserSpecifiedImage: c.Image}
	policy := pullPolicy(c)
	if policy != v1.PullAlways {
		st, err := m.is.ImageStatus(ctx, spec, false)
		if err != nil {
			return "", container.ErrImagePull, fmt.Sprintf("image status of %q: %v", c.Image, err)
		}
		if img := st.GetImage(); img != nil {
			if img.Id != "" {
				return img.Id, nil, ""
			}
			return c.Image, nil, ""
		}
		if policy == v1.PullNever {
			return "", container.ErrImageNeverPull, fmt.Sprintf("container image %q is not present with pull policy of Never", c.Image)
		}
	}
	key := "image_" + string(pod.UID) + "_" + c.Image
	if backOff != nil && backOff.IsInBackOffSinceUpdate(key, backOff.Clock.Now()) {
		return "", container.ErrImagePullBackOff, fmt.Sprintf("Back-off pulling image %q", c.Image)
	}
	ref, err := m.pull(ctx, pod, spec, sbConfig)
	if err != nil {
		if backOff != nil {
			backOff.Next(key, backOff.Clock.Now())
		}
		return "", container.ErrImagePull, fmt.Sprintf("failed to pull image %q: %v", c.Image, err)
	}
	if backOff != nil {
		backOff.DeleteEntry(key)
	}
	return ref, nil, ""
}

// pull pulls spec with each of the pod's credentials for it in turn, as the
// kubelet does: the first accepted wins; when all are refused, the error
// is every refusal's, joined (with what could not be read of the
// credentials). No credentials: one anonymous pull.
func (m *Manager) pull(ctx context.Context, pod *v1.Pod, spec *runtimeapi.ImageSpec, sbConfig *runtimeapi.PodSandboxConfig) (string, error) {
	var auths []*runtimeapi.AuthConfig
	var problems error
	if m.cfg.Credentials != nil {
		auths, problems = m.cfg.Credentials.Credentials(ctx, pod, spec.Image)
	}
	if len(auths) == 0 {
		ref, err := m.is.PullImage(ctx, spec, nil, sbConfig)
		if err != nil && problems != nil {
			return "", fmt.Errorf("%w (%v)", err, problems)
		}
		return ref, err
	}
	var errs []error
	for _, auth := range auths {
		ref, err := m.is.PullImage(ctx, spec, auth, sbConfig)
		if err == nil {
			return ref, nil
		}
		errs = append(errs, err)
	}
	if problems != nil {
		errs = append(errs, problems)
	}
	return "", utilerrors.NewAggregate(errs)
}
