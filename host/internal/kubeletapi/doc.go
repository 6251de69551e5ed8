// Package kubeletapi is the agent's authenticated API, the counterpart of the
// kubelet's server on port 10250: the API server reaches it for
// `kubectl logs` (GET /containerLogs/{namespace}/{pod}/{container}) and
// `kubectl exec`, `attach` and `port-forward` (/exec, /attach,
// /portForward, /run: the connection is proxied to the runtime's CRI
// streaming server, see RegisterStreaming); stats and metrics are not
// served yet.
//
// Every request is authenticated (x509 client certificates against a client
// CA, bearer tokens through TokenReview; anonymous requests only when
// enabled) and authorized against the node resource the way the kubelet
// maps requests (see requestAttributes): GET /containerLogs/... is "get
// nodes/proxy", GET /healthz is "get nodes/healthz" or "get nodes/proxy".
// Authorization is either a SubjectAccessReview to the API server (the
// "Webhook" mode, cached like the kubelet's: 5 min when allowed, 30 s when
// denied) or "AlwaysAllow".
//
// The container log reader understands the CRI log format the runtime
// writes ("<RFC3339Nano time> <stdout|stderr> <P|F> <text>", partial "P"
// entries joined into one line) and serves the v1.PodLogOptions the kubelet
// serves: tailLines, limitBytes, sinceSeconds, sinceTime, timestamps, follow
// and previous, plus stream (Stdout, Stderr or All). It reads one file, the
// current log of the container instance; the rotated files beside it are not
// read (as the kubelet), although a follow keeps going into the new file when
// the current one is rotated away.
package kubeletapi
