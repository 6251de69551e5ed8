package kubeletapi

import (
	"errors"
	"io"
	"net/http"
	"time"

	v1 "k8s.io/api/core/v1"
)

// containerLogs serves GET /containerLogs/{namespace}/{pod}/{container}: the
// container's log as text, with the query parameters of v1.PodLogOptions.
// Bad parameters are answered 400, an unknown pod or container 404. Once the
// log file is open the answer is 200 and the log streams, flushed line by
// line; a follow ends when the container stops or the client goes away.
func (s *Server) containerLogs(w http.ResponseWriter, r *http.Request) {
	namespace, pod, container := r.PathValue("namespace"), r.PathValue("pod"), r.PathValue("container")
	opts, err := parseLogOptions(r.URL.Query())
	if err != nil {
		writeText(w, http.StatusBadRequest, err.Error())
		return
	}
	path, running, err := s.cfg.Logs.LogFile(r.Context(), namespace, pod, container, opts.Previous)
	if err != nil {
		code := http.StatusBadRequest
		if errors.Is(err, ErrNotFound) {
			code = http.StatusNotFound
		}
		writeText(w, code, err.Error())
		return
	}
	f, err := openLog(path)
	if err != nil {
		writeText(w, http.StatusBadRequest, err.Error())
		return
	}
	defer f.Close()

	fw := flushWriter{w: w, rc: http.NewResponseController(w)}
	var stdout, stderr io.Writer = fw, fw
	if opts.Stream != nil {
		switch *opts.Stream {
		case v1.LogStreamStdout:
			stderr = nil
		case v1.LogStreamStderr:
			stdout = nil
		}
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	fw.rc.Flush() // the client sees the answer before the first line of a quiet follow

	if err := copyLogs(r.Context(), f, readOptionsFrom(opts, time.Now()), running, stdout, stderr); err != nil && r.Context().Err() == nil {
		s.log.Debug("container logs ended with an error", "namespace", namespace, "pod", pod, "container", container, "error", err)
	}
}

// flushWriter flushes after each write, so each log line reaches the client
// as it is read.
type flushWriter struct {
	w  io.Writer
	rc *http.ResponseController
}

func (f flushWriter) Write(p []byte) (int, error) {
	n, err := f.w.Write(p)
	if err != nil {
		return n, err
	}
	return n, f.rc.Flush()
}
