package nodememory

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"golang.org/x/sys/unix"
)

// Notifier is a cgroup v1 memory threshold notification on the root
// memory cgroup: the kernel signals an eventfd when
// memory.usage_in_bytes crosses the threshold set last. Build it with
// NewNotifier; Set arms it, Run waits for the signals.
type Notifier struct {
	dir string

	mu      sync.Mutex
	efd     int // -1 until Set
	usage   *os.File
	changed chan struct{}
}

// NewNotifier returns a Notifier for r's root memory cgroup, or
// ErrNotSupported on cgroup v2.
func (r *Reader) NewNotifier() (*Notifier, error) {
	if r.v2 {
		return nil, ErrNotSupported
	}
	return &Notifier{dir: r.v1Dir(), efd: -1, changed: make(chan struct{}, 1)}, nil
}

// Set registers a threshold of usage bytes (memory.usage_in_bytes, page
// cache included), replacing the one set before.
func (n *Notifier) Set(usageBytes uint64) error {
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return fmt.Errorf("nodememory: eventfd: %w", err)
	}
	usage, err := os.Open(filepath.Join(n.dir, "memory.usage_in_bytes"))
	if err != nil {
		unix.Close(efd)
		return fmt.Errorf("nodememory: %w", err)
	}
	ctl := filepath.Join(n.dir, "cgroup.event_control")
	if err := os.WriteFile(ctl, fmt.Appendf(nil, "%d %d %d", efd, usage.Fd(), usageBytes), 0); err != nil {
		usage.Close()
		unix.Close(efd)
		return fmt.Errorf("nodememory: register threshold %d in %s: %w", usageBytes, ctl, err)
	}
	n.mu.Lock()
	n.closeLocked()
	n.efd, n.usage = efd, usage
	n.mu.Unlock()
	select {
	case n.changed <- struct{}{}:
	default:
	}
	return nil
}

// closeLocked drops the registration (closing the eventfd unregisters
// it in the kernel).
func (n *Notifier) closeLocked() {
	if n.efd >= 0 {
		unix.Close(n.efd)
		n.usage.Close()
		n.efd, n.usage = -1, nil
	}
}

// Run calls crossed each time the kernel signals the threshold, until ctx
// ends; it closes the registration on return.
func (n *Notifier) Run(ctx context.Context, crossed func()) {
	defer func() {
		n.mu.Lock()
		n.closeLocked()
		n.mu.Unlock()
	}()
	buf := make([]byte, 8)
	for ctx.Err() == nil {
		n.mu.Lock()
		efd := n.efd
		n.mu.Unlock()
		if efd < 0 {
			select {
			case <-ctx.Done():
				return
			case <-n.changed:
				continue
			}
		}
		// Poll with a timeout so a new registration or ctx's end is seen.
		fds := []unix.PollFd{{Fd: int32(efd), Events: unix.POLLIN}}
		k, err := unix.Poll(fds, 500)
		if err != nil || k == 0 || fds[0].Revents&unix.POLLIN == 0 {
			continue
		}
		n.mu.Lock()
		same := n.efd == efd
		var rerr error
		if same {
			_, rerr = unix.Read(efd, buf)
		}
		n.mu.Unlock()
		if same && rerr == nil {
			crossed()
		}
	}
}
