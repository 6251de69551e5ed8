//go:build !wasip1

package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"
)

// saDir is where the kubelet mounts a pod's service-account token.
const saDir = "/var/run/secrets/kubernetes.io/serviceaccount"

// whoami posts a SelfSubjectReview to the API server at url with the
// pod's mounted token, trusting the mounted CA, and returns the user name
// the server saw.
func whoami(url string) (string, error) {
	token, err := os.ReadFile(saDir + "/token")
	if err != nil {
		return "", err
	}
	ca, err := os.ReadFile(saDir + "/ca.crt")
	if err != nil {
		return "", err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return "", fmt.Errorf("%s/ca.crt: no certificate", saDir)
	}
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	body := []byte(`{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}`)
	req, err := http.NewRequest(http.MethodPost, strings.TrimSuffix(url, "/")+"/apis/authentication.k8s.io/v1/selfsubjectreviews", bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode/100 != 2 {
		return "", fmt.Errorf("%s: %s", resp.Status, b)
	}
	var r struct {
		Status struct {
			UserInfo struct {
				Username string `json:"username"`
			} `json:"userInfo"`
		} `json:"status"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return "", err
	}
	return r.Status.UserInfo.Username, nil
}
