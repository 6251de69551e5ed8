package agent

import (
	"context"

	v1 "k8s.io/api/core/v1"

	"github.com/wasmlet/wasmlet/host/internal/imagecreds"
	"github.com/wasmlet/wasmlet/host/internal/objects"
	"github.com/wasmlet/wasmlet/host/internal/podenv"
	"github.com/wasmlet/wasmlet/host/internal/volumes"
)

// podData is where pods' data comes from and the parts that use it: the
// ConfigMaps, Secrets, tokens and Services (from the API server, or a
// local directory when standalone), the volume manager, the env resolver
// and the image pull credentials.
type podData struct {
	source   objects.Source
	tokens   objects.Tokens
	services objects.Services
	run      []func(context.Context) error // background parts

	volumes *volumes.Manager
	env     *podenv.Resolver
	creds   *imagecreds.Resolver
}

// newPodData builds the pod data parts; node is read when a pod needs it.
func (a *Agent) newPodData(node func() *v1.Node) (*podData, error) {
	d := &podData{}
	ccfg := imagecreds.Config{DockerConfig: a.cfg.ImagePullDockerConfig, Logger: a.log.Named("imagecreds")}
	if client := a.cluster.Client(); client != nil {
		c := objects.NewCluster(objects.ClusterConfig{Client: client, Logger: a.log.Named("objects")})
		d.source, d.tokens, d.services = c, c, c
		ccfg.ServiceAccounts = imagecreds.ClientServiceAccounts(client)
		d.run = append(d.run, c.Run)
	} else {
		l := objects.NewLocal(a.cfg.PodObjectsDir, a.log.Named("objects"))
		d.source, d.tokens, d.services = l, l, nil
	}
	ccfg.Secrets = d.source
	if a.cfg.ImageCredentialProviderConfig != "" {
		p, err := imagecreds.LoadProviders(imagecreds.ProvidersConfig{
			ConfigFile: a.cfg.ImageCredentialProviderConfig, BinDir: a.cfg.ImageCredentialProviderBinDir,
			Logger: a.log.Named("imagecreds"),
		})
		if err != nil {
			return nil, err
		}
		ccfg.Providers = p
	}
	creds, err := imagecreds.New(ccfg)
	if err != nil {
		return nil, err
	}
	d.creds = creds
	vm, err := volumes.New(volumes.Config{
		RootDir: a.cfg.RootDir, Objects: d.source, Tokens: d.tokens, Node: node,
		Logger: a.log.Named("volumes"),
	})
	if err != nil {
		return nil, err
	}
	d.volumes = vm
	d.run = append(d.run, vm.Run)
	d.env = podenv.New(podenv.Config{Objects: d.source, Services: d.services, Node: node,
		VolumePath: func(pod *v1.Pod, name string) (string, error) {
			p, _, err := vm.Path(pod, name)
			return p, err
		}})
	return d, nil
}
