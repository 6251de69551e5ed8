package kubeletapi

import (
	"net/http"
	"net/url"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// exec serves GET|POST /exec/{namespace}/{pod}[/{uid}]/{container}: the
// command of the repeated "command" parameter runs in the container with
// the streams the query asks for, over the connection upgraded to the
// runtime's streaming server.
func (h *streamHandlers) exec(w http.ResponseWriter, r *http.Request) {
	h.stream(w, r, func(pod *v1.Pod, container string, o streamOptions) (*url.URL, error) {
		return h.st.ExecURL(r.Context(), pod, container, r.URL.Query()[streamCommandParam], o.stdin, o.stdout, o.stderr, o.tty)
	})
}

// attach serves GET|POST /attach/{namespace}/{pod}[/{uid}]/{container}: the
// client is attached to the container's process with the streams the
// query asks for. Whether there is a terminal is the container spec's TTY,
// as in the kubelet: a running process's terminal cannot change.
func (h *streamHandlers) attach(w http.ResponseWriter, r *http.Request) {
	h.stream(w, r, func(pod *v1.Pod, container string, o streamOptions) (*url.URL, error) {
		return h.st.AttachURL(r.Context(), pod, container, o.stdin, o.stdout, o.stderr, specTTY(pod, container))
	})
}

// stream is what exec and attach share: the streams from the query (400
// when bad), the pod and container (404 when unknown), the runtime's
// streaming URL from streamURL, and the upgraded connection proxied to it.
func (h *streamHandlers) stream(w http.ResponseWriter, r *http.Request, streamURL func(*v1.Pod, string, streamOptions) (*url.URL, error)) {
	opts, err := parseStreamOptions(r.URL.Query())
	if err != nil {
		writeText(w, http.StatusBadRequest, err.Error())
		return
	}
	container := r.PathValue("container")
	pod, ok := h.pod(w, r, container)
	if !ok {
		return
	}
	u, err := streamURL(pod, container, opts)
	if err != nil {
		h.writeStreamingError(w, r, err)
		return
	}
	h.proxy(w, r, u)
}

// run serves POST /run/{namespace}/{pod}[/{uid}]/{container}?cmd=..: the
// command, the "cmd" parameter split at spaces, runs in the container to
// its end without a timeout (as the kubelet); the answer is 200 with its
// output (stdout then stderr), typed application/json as the kubelet's
// although it is not JSON, or 500 with the error, a non-zero exit included.
func (h *streamHandlers) run(w http.ResponseWriter, r *http.Request) {
	cmd := r.URL.Query().Get(streamRunCmdParam)
	if cmd == "" {
		writeText(w, http.StatusBadRequest, missingStreamParam(streamRunCmdParam).Error())
		return
	}
	container := r.PathValue("container")
	pod, ok := h.pod(w, r, container)
	if !ok {
		return
	}
	out, err := h.st.RunInContainer(r.Context(), pod, container, strings.Split(cmd, " "), 0)
	if err != nil {
		h.log.Debug("run failed", "path", r.URL.Path, "error", err)
		writeText(w, http.StatusInternalServerError, err.Error())
		return
	}
	if len(out) == 0 {
		w.WriteHeader(http.StatusOK)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	if _, err := w.Write(out); err != nil {
		h.log.Debug("writing the output of run", "path", r.URL.Path, "error", err)
	}
}
