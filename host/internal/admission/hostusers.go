package admission

import (
	"context"
)

// HostUsersName is the name of the HostUsers admitter.
const HostUsersName = "HostUsers"

// HostUsers rejects a pod asking for a user namespace of its own
// (hostUsers: false): the node does not allocate the ID mappings the
// runtime needs for one, and running the pod in the node's user namespace
// instead would silently give it what it asked not to have.
func HostUsers() Admitter { return hostUsers{} }

type hostUsers struct{}

func (hostUsers) Name() string { return HostUsersName }

func (hostUsers) Admit(_ context.Context, a Attributes) (Result, error) {
	if h := a.Pod.Spec.HostUsers; h != nil && !*h {
		return Result{Reason: "UserNamespacesUnsupported", Message: "spec.hostUsers: false asks for a user namespace, which this node does not support"}, nil
	}
	return Result{Admit: true}, nil
}
