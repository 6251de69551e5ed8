package kubeletapi

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// portForward serves GET|POST /portForward/{namespace}/{pod}[/{uid}]: the
// connection is upgraded to the runtime's streaming server for the pod's
// sandbox, where each pair of streams (data, error) names the port it
// forwards. The "port" parameters are optional (the API server sends the
// ports kubectl asked for, but over SPDY the streams' headers decide);
// when present they must be valid.
func (h *streamHandlers) portForward(w http.ResponseWriter, r *http.Request) {
	ports, err := parseForwardPorts(r.URL.Query()[streamPortParam])
	if err != nil {
		writeText(w, http.StatusBadRequest, err.Error())
		return
	}
	pod, ok := h.pod(w, r, "")
	if !ok {
		return
	}
	u, err := h.st.PortForwardURL(r.Context(), pod, ports)
	if err != nil {
		h.writeStreamingError(w, r, err)
		return
	}
	h.proxy(w, r, u)
}

// parseForwardPorts reads the "port" parameters, each a port or a
// comma-separated list of ports from 1 to 65535, as the kubelet reads them
// for websocket port-forwarding.
func parseForwardPorts(values []string) ([]int32, error) {
	var ports []int32
	for _, v := range values {
		if v == "" {
			return nil, fmt.Errorf("query parameter %q cannot be empty", streamPortParam)
		}
		for _, p := range strings.Split(v, ",") {
			n, err := strconv.ParseUint(p, 10, 16)
			if err != nil {
				return nil, fmt.Errorf("unable to parse %q as a port: %v", v, err)
			}
			if n < 1 {
				return nil, fmt.Errorf("port %q must be > 0", v)
			}
			ports = append(ports, int32(n))
		}
	}
	return ports, nil
}
