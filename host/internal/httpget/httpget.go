// Package httpget performs the HTTP GET of a probe or a lifecycle handler
// (v1.HTTPGetAction) the way the kubelet does for both: the port resolved
// from the container, the pod IP unless the action names a host, the
// action's headers (a "Host" header sets the request's host), TLS not
// verified, no proxy, no keep-alive, and redirects followed only within
// the same host (at most 10).
package httpget

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/wasmlet/wasmlet/host/internal/podspec"
)

// Request is one HTTP GET of a container's probe or lifecycle handler.
type Request struct {
	// Action is the probe's or handler's HTTP GET.
	Action *v1.HTTPGetAction
	// Container is the container the action belongs to (its named ports).
	Container *v1.Container
	// PodIP is the host asked when the action names none.
	PodIP string
	// UserAgent is the User-Agent header ("kube-probe/…",
	// "kube-lifecycle/…"); a User-Agent among the action's headers wins.
	UserAgent string
	// Timeout bounds the whole request, redirects included.
	Timeout time.Duration
	// MaxBody is how much of the answer's body is kept.
	MaxBody int64
}

// Response is the answer to a Request.
type Response struct {
	// URL is the URL asked first.
	URL *url.URL
	// StatusCode and Status are the final answer's.
	StatusCode int
	Status     string
	// Body is the start of the final answer's body (Request.MaxBody at
	// most).
	Body []byte
}

// Redirected reports whether the final answer is a redirect that was not
// followed (one to another host).
func (r *Response) Redirected() bool {
	return r.StatusCode >= 300 && r.StatusCode < 400
}

// Do performs the request. It fails when the URL cannot be made (a port
// the container does not have) or no answer came; any answer, whatever
// its status, is a Response for the caller to judge.
func Do(ctx context.Context, r Request) (*Response, error) {
	u, err := URL(r.Action, r.Container, r.PodIP)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("User-Agent", r.UserAgent)
	req.Header.Set("Accept", "*/*")
	for _, hd := range r.Action.HTTPHeaders {
		if strings.EqualFold(hd.Name, "Host") {
			req.Host = hd.Value
			continue
		}
		req.Header.Add(hd.Name, hd.Value)
	}
	client := &http.Client{
		Timeout: r.Timeout,
		Transport: &http.Transport{
			TLSClientConfig:   &tls.Config{InsecureSkipVerify: true},
			DisableKeepAlives: true,
			Proxy:             nil,
		},
		CheckRedirect: func(next *http.Request, via []*http.Request) error {
			if next.URL.Hostname() != u.Hostname() {
				return http.ErrUseLastResponse // the 3xx answer is the response
			}
			if len(via) >= 10 {
				return errors.New("stopped after 10 redirects")
			}
			return nil
		},
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, r.MaxBody))
	return &Response{URL: u, StatusCode: resp.StatusCode, Status: resp.Status, Body: body}, nil
}

// URL is the URL an HTTP GET action asks: its scheme (http when unset),
// its host or else podIP, its port resolved from the container, its path
// (a leading "/" added).
func URL(a *v1.HTTPGetAction, c *v1.Container, podIP string) (*url.URL, error) {
	host := a.Host
	if host == "" {
		host = podIP
	}
	port, err := podspec.ContainerPort(c, a.Port)
	if err != nil {
		return nil, err
	}
	scheme := strings.ToLower(string(a.Scheme))
	if scheme == "" {
		scheme = "http"
	}
	path := a.Path
	if !strings.HasPrefix(path, "/") {
		path = "/" + path
	}
	u, err := url.Parse(scheme + "://" + net.JoinHostPort(host, strconv.Itoa(port)) + path)
	if err != nil {
		return nil, fmt.Errorf("HTTP GET of container %s: %w", c.Name, err)
	}
	return u, nil
}
