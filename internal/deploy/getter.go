package deploy

import (
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/transport"
)

// getter is a kubeconfig-based RESTClientGetter whose discovery cache
// lives in memory. kubectl's default caches discovery on disk per host for
// hours, which goes stale when a CRD appears or a test cluster reuses a
// port; one apply needs only a fresh view.
type getter struct {
	*genericclioptions.ConfigFlags
	once   sync.Once
	disco  discovery.CachedDiscoveryInterface
	mapper meta.RESTMapper
	err    error
}

// NewGetter points at a cluster through a kubeconfig file and context;
// empty values mean kubectl's defaults ($KUBECONFIG, ~/.kube/config,
// in-cluster config). Each wrap wraps the transport of every client made
// from it (the webhook's leader fence refuses writes there).
func NewGetter(kubeconfig, context string, wrap ...transport.WrapperFunc) genericclioptions.RESTClientGetter {
	f := genericclioptions.NewConfigFlags(false)
	f.KubeConfig, f.Context = &kubeconfig, &context
	// client-go's default of 5 requests a second makes a 1,000-object apply
	// take minutes; the server's priority and fairness protects it instead.
	f.WrapConfigFn = func(c *rest.Config) *rest.Config {
		c.QPS, c.Burst = 100, 200
		for _, w := range wrap {
			c.Wrap(w)
		}
		return c
	}
	return &getter{ConfigFlags: f}
}

func (g *getter) init() {
	g.once.Do(func() {
		cfg, err := g.ConfigFlags.ToRESTConfig()
		if err != nil {
			g.err = err
			return
		}
		dc, err := discovery.NewDiscoveryClientForConfig(cfg)
		if err != nil {
			g.err = err
			return
		}
		g.disco = memory.NewMemCacheClient(dc)
		m := restmapper.NewDeferredDiscoveryRESTMapper(g.disco)
		g.mapper = restmapper.NewShortcutExpander(m, g.disco, nil)
	})
}

func (g *getter) ToDiscoveryClient() (discovery.CachedDiscoveryInterface, error) {
	g.init()
	return g.disco, g.err
}

func (g *getter) ToRESTMapper() (meta.RESTMapper, error) {
	g.init()
	return g.mapper, g.err
}
