// Package logrotate rotates the running containers' CRI log files by size
// and count, as the kubelet's container log manager does: every Period,
// a log over MaxSize is renamed to <log>.<timestamp>, the runtime is asked
// to reopen it (CRI ReopenContainerLog), older rotated files are gzipped,
// and at most MaxFiles files are kept per container (the live log, the
// newest rotated one uncompressed, the rest compressed), oldest removed
// first so that a `kubectl logs -f` reading the live file is not broken.
package logrotate

import (
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/wasmlet/wasmlet/host/internal/container"
	"k8s.io/apimachinery/pkg/util/wait"
)

// The kubelet's defaults (containerLogMaxSize, containerLogMaxFiles,
// containerLogMonitorInterval).
const (
	DefaultMaxSize  = 10 << 20
	DefaultMaxFiles = 5
	DefaultPeriod   = 10 * time.Second
)

// The rotated files' names: <log>.<timestamp>[.gz]; .tmp marks a
// compression cut short.
const (
	timestampFormat = "20060102-150405"
	compressSuffix  = ".gz"
	tmpSuffix       = ".tmp"
)

// Runtime lists the running containers' logs and reopens one
// (runtime.Manager).
type Runtime interface {
	// RunningContainerLogs are the running containers' log files.
	RunningContainerLogs(ctx context.Context) ([]container.ContainerLog, error)
	// ReopenContainerLog makes the runtime write to a new file at the
	// container's log path.
	ReopenContainerLog(ctx context.Context, id string) error
}

// Config configures a Rotator.
type Config struct {
	// Runtime lists and reopens container logs; required.
	Runtime Runtime
	// MaxSize is the size in bytes over which a log is rotated; 0 means
	// DefaultMaxSize.
	MaxSize int64
	// MaxFiles is how many files a container's log may span, the live one
	// included; at least 2; 0 means DefaultMaxFiles.
	MaxFiles int
	// Period is the time between two checks; 0 means DefaultPeriod.
	Period time.Duration
	// Logger receives rotations at debug and failures at warn; nil
	// discards.
	Logger hclog.Logger
	// Now is the clock of the rotated files' names; nil means time.Now.
	Now func() time.Time
}

// Rotator rotates container logs. Create it with New, then Run.
type Rotator struct {
	cfg Config
	log hclog.Logger
}

// New checks cfg and fills in its defaults.
func New(cfg Config) (*Rotator, error) {
	if cfg.Runtime == nil {
		return nil, errors.New("logrotate: Runtime is required")
	}
	if cfg.MaxSize < 0 {
		return nil, fmt.Errorf("logrotate: container log max size %d is negative", cfg.MaxSize)
	}
	if cfg.MaxSize == 0 {
		cfg.MaxSize = DefaultMaxSize
	}
	if cfg.MaxFiles == 0 {
		cfg.MaxFiles = DefaultMaxFiles
	}
	if cfg.MaxFiles < 2 {
		return nil, fmt.Errorf("logrotate: container log max files must be at least 2, not %d", cfg.MaxFiles)
	}
	if cfg.Period <= 0 {
		cfg.Period = DefaultPeriod
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Rotator{cfg: cfg, log: cfg.Logger}, nil
}

// Run checks the logs at once and then every Period until ctx ends.
func (r *Rotator) Run(ctx context.Context) error {
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		if err := r.RotateOnce(ctx); err != nil && ctx.Err() == nil {
			r.log.Warn("container log rotation", "error", err)
		}
	}, r.cfg.Period)
	return nil
}

// RotateOnce rotates each running container's log that is over MaxSize.
// One container's failure does not stop the others; the errors are
// joined.
func (r *Rotator) RotateOnce(ctx context.Context) error {
	logs, err := r.cfg.Runtime.RunningContainerLogs(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for _, l := range logs {
		fi, err := os.Stat(l.Path)
		if err != nil {
			// The runtime may not have created it yet; the kubelet
			// reopens a missing log so that it appears.
			if errors.Is(err, os.ErrNotExist) {
				if err := r.cfg.Runtime.ReopenContainerLog(ctx, l.ID); err != nil {
					errs = append(errs, err)
				}
				continue
			}
			errs = append(errs, err)
			continue
		}
		if fi.Size() <= r.cfg.MaxSize {
			continue
		}
		if err := r.rotate(ctx, l); err != nil {
			errs = append(errs, fmt.Errorf("container %s: %w", l.ID, err))
			continue
		}
		r.log.Debug("rotated container log", "container", l.ID, "path", l.Path, "size", fi.Size())
	}
	return errors.Join(errs...)
}

// rotate trims the rotated files to MaxFiles-2, compresses all of them,
// then renames the live log away and has the runtime reopen it (renamed
// back when the runtime fails, to try again next time).
func (r *Rotator) rotate(ctx context.Context, l container.ContainerLog) error {
	rotated, err := filepath.Glob(globEscape(l.Path) + ".*")
	if err != nil {
		return err
	}
	if rotated, err = removeUnused(rotated); err != nil {
		return err
	}
	sort.Strings(rotated) // oldest first: the timestamps sort
	keep := r.cfg.MaxFiles - 2
	for len(rotated) > keep {
		if err := os.Remove(rotated[0]); err != nil {
			return fmt.Errorf("remove old log: %w", err)
		}
		rotated = rotated[1:]
	}
	for _, f := range rotated {
		if !strings.HasSuffix(f, compressSuffix) {
			if err := compress(f); err != nil {
				return err
			}
		}
	}
	to := l.Path + "." + r.cfg.Now().Format(timestampFormat)
	if err := os.Rename(l.Path, to); err != nil {
		return fmt.Errorf("rotate log: %w", err)
	}
	if err := r.cfg.Runtime.ReopenContainerLog(ctx, l.ID); err != nil {
		if err2 := os.Rename(to, l.Path); err2 != nil {
			r.log.Error("could not rename a rotated log back; its lines are in the rotated file", "from", to, "to", l.Path, "error", err2)
		}
		return err
	}
	return nil
}

// removeUnused deletes what an interrupted rotation left (a .tmp file, an
// uncompressed file whose .gz exists) and returns the rest.
func removeUnused(files []string) ([]string, error) {
	have := map[string]bool{}
	for _, f := range files {
		have[f] = true
	}
	var out []string
	for _, f := range files {
		if strings.HasSuffix(f, tmpSuffix) || have[f+compressSuffix] {
			if err := os.Remove(f); err != nil {
				return nil, fmt.Errorf("remove unused log: %w", err)
			}
			continue
		}
		out = append(out, f)
	}
	return out, nil
}

// compress gzips f into f.gz (through f.gz.tmp, renamed when whole) and
// removes f.
func compress(f string) (err error) {
	in, err := os.Open(f)
	if err != nil {
		return fmt.Errorf("compress log: %w", err)
	}
	defer in.Close()
	tmp := f + compressSuffix + tmpSuffix
	out, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("compress log: %w", err)
	}
	defer func() {
		if err != nil {
			out.Close()
			os.Remove(tmp)
		}
	}()
	zw := gzip.NewWriter(out)
	if _, err = io.Copy(zw, in); err != nil {
		return fmt.Errorf("compress log %s: %w", f, err)
	}
	if err = zw.Close(); err != nil {
		return fmt.Errorf("compress log %s: %w", f, err)
	}
	if err = out.Close(); err != nil {
		return fmt.Errorf("compress log %s: %w", f, err)
	}
	if err = os.Rename(tmp, f+compressSuffix); err != nil {
		return fmt.Errorf("compress log: %w", err)
	}
	return os.Remove(f)
}

// globEscape escapes the glob metacharacters of a path.
func globEscape(p string) string {
	r := strings.NewReplacer(`\`, `\\`, `*`, `\*`, `?`, `\?`, `[`, `\[`)
	return r.Replace(p)
}
