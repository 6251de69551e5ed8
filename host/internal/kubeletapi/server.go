package kubeletapi

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
)

// Server is the authenticated node API. Every handler, including those added
// with Handle, is behind the authentication and authorization filter.
type Server struct {
	cfg   Config
	log   hclog.Logger
	mux   *http.ServeMux
	authn authenticator.Request
	authz authorizer.Authorizer
	tls   *dynamicTLS
	ln    net.Listener
	// refused logs refused requests, rate-limited.
	refused *refusals
}

// options are test hooks.
type options struct {
	// authorizer replaces the one Config.Authorization selects.
	authorizer authorizer.Authorizer
	// listener replaces listening on Config.Address and Config.Port.
	listener net.Listener
}

// New loads (or generates) the serving certificate and the client CA, builds
// the authenticator and authorizer, and listens; Run serves.
func New(cfg Config) (*Server, error) {
	return newServer(cfg, options{})
}

func newServer(cfg Config, opts options) (*Server, error) {
	if cfg.Address == "" {
		cfg.Address = "0.0.0.0"
	}
	if cfg.Port == 0 {
		cfg.Port = DefaultPort
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	s := &Server{cfg: cfg, log: cfg.Logger, mux: http.NewServeMux(), refused: newRefusals(cfg.Logger)}

	var ca dynamiccertificates.CAContentProvider // nil: no x509 authentication
	caSource := "none: x509 client certificates are not accepted"
	switch {
	case cfg.ClientCAFile != "":
		fileCA, err := dynamiccertificates.NewDynamicCAContentFromFile("client-ca-bundle", cfg.ClientCAFile)
		if err != nil {
			return nil, fmt.Errorf("kubelet API: client CA: %w", err)
		}
		ca, caSource = fileCA, cfg.ClientCAFile
	case len(cfg.ClientCA) > 0:
		static, err := dynamiccertificates.NewStaticCAContent("client-ca-bundle", cfg.ClientCA)
		if err != nil {
			return nil, fmt.Errorf("kubelet API: client CA from %s: %w", cfg.ClientCASource, err)
		}
		ca, caSource = static, cfg.ClientCASource
	}
	s.refused.x509, s.refused.caName = ca != nil, caSource
	var err error
	cfg.Caches = cfg.Caches.withDefaults()
	tokens := cfg.Client
	if cfg.NoTokenReview {
		tokens = nil
	}
	if s.authn, err = newAuthenticator(ca, tokens, cfg.Caches.Token, cfg.Anonymous); err != nil {
		return nil, fmt.Errorf("kubelet API: %w", err)
	}
	if s.authz = opts.authorizer; s.authz == nil {
		if s.authz, err = newAuthorizer(cfg.Authorization, cfg.Client, cfg.Caches); err != nil {
			return nil, fmt.Errorf("kubelet API: %w", err)
		}
	}
	var certFile, keyFile string
	if cfg.GetCertificate == nil {
		if certFile, keyFile, err = servingCertFiles(cfg); err != nil {
			return nil, fmt.Errorf("kubelet API: %w", err)
		}
	}
	if s.tls, err = newDynamicTLS(certFile, keyFile, cfg.GetCertificate, ca); err != nil {
		return nil, fmt.Errorf("kubelet API: %w", err)
	}
	authz := cfg.Authorization
	if authz == "" {
		authz = AuthorizationWebhook
	}
	s.log.Info("kubelet API authentication and authorization", "client_ca", caSource,
		"token_review", !isNil(cfg.Client) && !cfg.NoTokenReview, "anonymous", cfg.Anonymous, "authorization_mode", authz)

	s.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeText(w, http.StatusOK, "ok")
	})
	if cfg.Logs != nil {
		s.mux.HandleFunc("GET /containerLogs/{namespace}/{pod}/{container}", s.containerLogs)
	}

	if s.ln = opts.listener; s.ln == nil {
		addr := net.JoinHostPort(cfg.Address, strconv.Itoa(cfg.Port))
		if s.ln, err = net.Listen("tcp", addr); err != nil {
			return nil, fmt.Errorf("kubelet API: listen on %s: %w", addr, err)
		}
	}
	return s, nil
}

// Handle registers h for pattern (a net/http.ServeMux pattern, such as
// "POST /exec/{namespace}/{pod}/{container}") behind the same
// authentication and authorization as the built-in endpoints. It may be
// called before or while Run serves; like ServeMux.Handle it panics on a
// pattern that conflicts with a registered one.
func (s *Server) Handle(pattern string, h http.Handler) {
	s.mux.Handle(pattern, h)
}

// Addr is the address the server listens on.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Run serves TLS until ctx ends, then shuts down: requests in flight (a
// followed log) see their context cancelled and get 5 s to finish.
func (s *Server) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		s.tls.run(ctx)
	}()
	defer func() {
		cancel()
		wg.Wait()
	}()

	// The kubelet's timeouts: long enough for exec and port-forward streams.
	srv := &http.Server{
		Handler:        s,
		TLSConfig:      s.tls.config,
		IdleTimeout:    90 * time.Second,
		ReadTimeout:    4 * time.Hour,
		WriteTimeout:   4 * time.Hour,
		MaxHeaderBytes: 1 << 20,
		BaseContext:    func(net.Listener) context.Context { return ctx },
		ErrorLog:       s.log.StandardLogger(&hclog.StandardLoggerOptions{ForceLevel: hclog.Debug}),
	}
	done := make(chan error, 1)
	go func() { done <- srv.ServeTLS(s.ln, "", "") }()
	s.log.Info("kubelet API listening", "address", s.ln.Addr().String())
	select {
	case err := <-done:
		return fmt.Errorf("kubelet API on %s: %w", s.ln.Addr(), err)
	case <-ctx.Done():
	}
	cancel()
	sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer scancel()
	err := srv.Shutdown(sctx)
	if err != nil {
		srv.Close()
	}
	if e := <-done; e != nil && !errors.Is(e, http.ErrServerClosed) && err == nil {
		err = e
	}
	s.log.Info("kubelet API stopped")
	return err
}

// ServeHTTP authenticates and authorizes the request, then serves it. A
// request without an identity is refused with 401, one the authorizer does
// not allow with 403. Each request is logged at debug.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	rec := &recorder{ResponseWriter: w}
	userName := ""
	defer func() {
		s.log.Debug("request", "method", r.Method, "path", r.URL.Path, "user", userName,
			"status", rec.status(), "duration", time.Since(start), "remote", r.RemoteAddr)
	}()

	resp, ok, err := s.authn.AuthenticateRequest(r)
	if err != nil || !ok {
		s.refused.note(r, "", http.StatusUnauthorized, s.refused.unauthenticated(r, err))
		writeText(rec, http.StatusUnauthorized, "Unauthorized")
		return
	}
	userName = resp.User.GetName()
	if code, msg := s.authorize(resp.User, r); code != 0 {
		s.refused.note(r, userName, code, strings.TrimSpace(msg))
		writeText(rec, code, msg)
		return
	}
	s.mux.ServeHTTP(rec, r)
}

// writeText answers with a plain text body, as the kubelet's error strings.
func writeText(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	io.WriteString(w, msg)
}

// recorder notes a response's status for the request log; it passes
// flushing and hijacking (for the upgrade of exec and port-forward) through.
type recorder struct {
	http.ResponseWriter
	code int
}

func (r *recorder) WriteHeader(code int) {
	if r.code == 0 {
		r.code = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(p []byte) (int, error) {
	if r.code == 0 {
		r.code = http.StatusOK
	}
	return r.ResponseWriter.Write(p)
}

// Flush implements http.Flusher.
func (r *recorder) Flush() {
	if r.code == 0 {
		r.code = http.StatusOK
	}
	http.NewResponseController(r.ResponseWriter).Flush()
}

// Hijack implements http.Hijacker.
func (r *recorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	if r.code == 0 {
		r.code = http.StatusSwitchingProtocols
	}
	return http.NewResponseController(r.ResponseWriter).Hijack()
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

func (r *recorder) status() int {
	if r.code == 0 {
		return http.StatusOK
	}
	return r.code
}
