package objects

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// errServicesNotSynced is Services' error before the informer's first list.
var errServicesNotSynced = errors.New("services: the informer has not synced yet")

// Services returns the Services in namespace (all namespaces when it is
// "") from the informer Run started, sorted by namespace and name. The
// objects are the informer's: callers must not modify them. Before the
// informer has synced (or before Run) it returns an error saying so.
func (c *Cluster) Services(namespace string) ([]*v1.Service, error) {
	if c.svcInformer == nil {
		return nil, fmt.Errorf("services: %w", errNoClient)
	}
	if !c.svcInformer.HasSynced() {
		return nil, errServicesNotSynced
	}
	var (
		list []*v1.Service
		err  error
	)
	if namespace == "" {
		list, err = c.svcLister.List(labels.Everything())
	} else {
		list, err = c.svcLister.Services(namespace).List(labels.Everything())
	}
	if err != nil {
		return nil, fmt.Errorf("services in namespace %q: %w", namespace, err)
	}
	slices.SortFunc(list, func(a, b *v1.Service) int {
		if c := strings.Compare(a.Namespace, b.Namespace); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	return list, nil
}
