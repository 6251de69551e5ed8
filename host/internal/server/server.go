// Package server is the agent's read-only HTTP server, like the kubelet's
// read-only port: /healthz (with ?verbose listing each check), /pods (a v1
// PodList), /metrics (Prometheus), and extra handlers the agent adds (for
// example /plugins). It listens on 127.0.0.1 by default.
package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Check is one named health check of /healthz; Check returns nil when
// healthy.
type Check struct {
	// Name names the check in /healthz?verbose ("runtime", "pleg", …).
	Name string
	// Check reports the check's health.
	Check func() error
}

// Config configures a Server.
type Config struct {
	// Address is the listen address; empty means 127.0.0.1.
	Address string
	// Port is the listen port; 0 picks a free one (see Server.Addr).
	Port int
	// Pods returns the pods /pods serves (desired spec with current status).
	Pods func() []v1.Pod
	// Checks are the /healthz checks after the built-in "ping".
	Checks []Check
	// Gatherer serves /metrics; nil means prometheus.DefaultGatherer.
	Gatherer prometheus.Gatherer
	// Logger receives start, stop and handler errors; nil discards.
	Logger hclog.Logger
	// Handlers are extra handlers by pattern (e.g. "/plugins").
	Handlers map[string]http.Handler
	// HealthzOnly serves /healthz alone, as the kubelet's healthz port:
	// no /pods, /metrics or Handlers.
	HealthzOnly bool
}

// Server is the read-only HTTP server. Create it with New, then Run.
type Server struct {
	cfg Config
	log hclog.Logger
	mux *http.ServeMux
	ln  net.Listener
}

// New listens on cfg's address and port and returns the server; Run serves.
func New(cfg Config) (*Server, error) {
	if cfg.Address == "" {
		cfg.Address = "127.0.0.1"
	}
	if cfg.Gatherer == nil {
		cfg.Gatherer = prometheus.DefaultGatherer
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.Pods == nil {
		cfg.Pods = func() []v1.Pod { return nil }
	}
	s := &Server{cfg: cfg, log: cfg.Logger, mux: http.NewServeMux()}
	s.mux.HandleFunc("/healthz", s.healthz)
	what := "healthz server"
	if !cfg.HealthzOnly {
		what = "read-only server"
		s.mux.HandleFunc("/pods", s.pods)
		s.mux.HandleFunc("/pods/", s.pods)
		s.mux.Handle("/metrics", promhttp.HandlerFor(cfg.Gatherer, promhttp.HandlerOpts{ErrorLog: cfg.Logger.StandardLogger(nil)}))
		for pattern, h := range cfg.Handlers {
			s.mux.Handle(pattern, h)
		}
	}
	addr := net.JoinHostPort(cfg.Address, strconv.Itoa(cfg.Port))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%s: listen on %s: %w", what, addr, err)
	}
	s.ln = ln
	return s, nil
}

// Addr is the address the server listens on.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Handler is the server's handler (for tests and for mounting elsewhere).
func (s *Server) Handler() http.Handler { return s.mux }

// Run serves until ctx is done, then shuts down gracefully (5 s at most).
func (s *Server) Run(ctx context.Context) error {
	srv := &http.Server{Handler: s.mux, ReadHeaderTimeout: 10 * time.Second, ErrorLog: s.log.StandardLogger(nil)}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(s.ln) }()
	s.log.Info("read-only server listening", "address", s.ln.Addr().String())
	select {
	case err := <-done:
		return fmt.Errorf("read-only server on %s: %w", s.ln.Addr(), err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := srv.Shutdown(sctx)
	if e := <-done; e != nil && !errors.Is(e, http.ErrServerClosed) && err == nil {
		err = e
	}
	return err
}

// healthz answers "ok" when every check passes, like the kubelet's
// healthz; with ?verbose it lists each check as "[+]name ok" or
// "[-]name failed: reason".
func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	_, verbose := r.URL.Query()["verbose"]
	checks := append([]Check{{Name: "ping", Check: func() error { return nil }}}, s.cfg.Checks...)
	var body []byte
	failed := false
	for _, c := range checks {
		if err := c.Check(); err != nil {
			failed = true
			body = fmt.Appendf(body, "[-]%s failed: %v\n", c.Name, err)
			s.log.Warn("healthz check failed", "check", c.Name, "error", err)
			continue
		}
		body = fmt.Appendf(body, "[+]%s ok\n", c.Name)
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if failed {
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = w.Write(append(body, "healthz check failed\n"...))
		return
	}
	if !verbose {
		_, _ = w.Write([]byte("ok"))
		return
	}
	_, _ = w.Write(append(body, "healthz check passed\n"...))
}

// pods serves the pods as a v1 PodList, as the kubelet's read-only /pods.
func (s *Server) pods(w http.ResponseWriter, r *http.Request) {
	list := v1.PodList{
		TypeMeta: metav1.TypeMeta{Kind: "PodList", APIVersion: "v1"},
		Items:    s.cfg.Pods(),
	}
	if list.Items == nil {
		list.Items = []v1.Pod{}
	}
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewEncoder(w).Encode(&list); err != nil {
		s.log.Error("write /pods", "error", err)
	}
}
