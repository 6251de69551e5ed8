// Package podenv computes what a container sees of its pod the way the
// kubelet does: its environment (service links, envFrom, env with $(VAR)
// expansion and the downward API, ConfigMap and Secret references), its
// command and args after expansion, and its volume mounts' subPathExpr.
//
// The behaviour follows kubelet v1.36 (pkg/kubelet/kubelet_pods.go
// makeEnvironmentVariables, pkg/kubelet/envvars, pkg/fieldpath,
// pkg/api/v1/resource and the forked expansion package), including the
// error texts that end up as a container's CreateContainerConfigError
// message.
//
// FieldValue and ResourceValue hold no state and are shared with the
// downwardAPI volumes.
package podenv
