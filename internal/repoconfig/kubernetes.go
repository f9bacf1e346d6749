package repoconfig

import (
	"fmt"
	"strings"

	"github.com/kplan-dev/kplan/internal/kubeversion"
)

// check refuses a version that is no Kubernetes version, an API version
// that is none, a cluster with neither name nor server, and a name or
// server given twice; it normalises the versions (kubeversion.Parse).
func (k *Kubernetes) check() []error {
	var errs []error
	field := File + ": kubernetes"
	if k.Version != "" {
		v, err := kubeversion.Parse(k.Version)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s.version: %w", field, err))
		}
		k.Version = v
	}
	if err := kubeversion.CheckAPIVersions(k.APIVersions); err != nil {
		errs = append(errs, fmt.Errorf("%s.%w", field, err))
	}
	seen := map[string]int{}
	for i := range k.Clusters {
		cl := &k.Clusters[i]
		at := fmt.Sprintf("%s.clusters[%d]", field, i)
		if cl.Name == "" && cl.Server == "" {
			errs = append(errs, fmt.Errorf("%s: give the cluster's name (a target's name or environment, a Flux cluster, an Argo CD cluster) or its server (an Argo CD destination)", at))
		}
		for _, id := range []string{cl.Name, cl.Server} {
			if j, dup := seen[id]; dup && id != "" {
				errs = append(errs, fmt.Errorf("%s: %q is also kubernetes.clusters[%d]", at, id, j))
			} else if id != "" {
				seen[id] = i
			}
		}
		if cl.Version != "" {
			v, err := kubeversion.Parse(cl.Version)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s.version: %w", at, err))
			}
			cl.Version = v
		}
		if err := kubeversion.CheckAPIVersions(cl.APIVersions); err != nil {
			errs = append(errs, fmt.Errorf("%s.%w", at, err))
		}
	}
	return errs
}

// Capabilities are what the charts of a cluster are templated for: the
// first of kubernetes.clusters whose name or server is one of ids (a
// target's name and environment, a Flux cluster's name, an Argo CD
// destination's name and server), with the top version and API versions
// for what it leaves unset; else the top ones; else kplan's default. A
// nil Config (no .kplan.yaml) gives the default.
func (c *Config) Capabilities(ids ...string) kubeversion.Capabilities {
	out := kubeversion.Defaults()
	if c == nil {
		return out
	}
	k := c.Kubernetes
	if k.Version != "" || len(k.APIVersions) > 0 {
		out = kubeversion.Capabilities{Version: cmpOr(k.Version, kubeversion.Default), APIVersions: k.APIVersions, From: File + " kubernetes"}
	}
	for i, cl := range k.Clusters {
		if !matches(cl, ids) {
			continue
		}
		out.From = fmt.Sprintf("%s kubernetes.clusters[%d] (%s)", File, i, cmpOr(cl.Name, cl.Server))
		if cl.Version != "" {
			out.Version = cl.Version
		}
		if len(cl.APIVersions) > 0 {
			out.APIVersions = cl.APIVersions
		}
		break
	}
	return out
}

func matches(cl KubernetesCluster, ids []string) bool {
	for _, id := range ids {
		if id != "" && (id == cl.Name || id == strings.TrimSuffix(cl.Server, "/") || id == cl.Server) {
			return true
		}
	}
	return false
}

// checkTargetsKubernetes refuses two targets of one overlay whose
// clusters run other Kubernetes: the overlay renders once.
func (c *Config) checkTargetsKubernetes() []error {
	var errs []error
	first := map[string]int{}
	for i, t := range c.Targets {
		j, seen := first[t.Overlay]
		if !seen {
			first[t.Overlay] = i
			continue
		}
		a, b := c.Capabilities(c.Targets[j].Name, c.Targets[j].Environment), c.Capabilities(t.Name, t.Environment)
		if !a.Equal(b) {
			errs = append(errs, targetError(i, "overlay", "%s is also targets[%d]'s, whose cluster runs %s, and this one's %s: kplan renders an overlay once; give each cluster its own overlay, or declare them alike", t.Overlay, j, a, b))
		}
	}
	return errs
}

// TargetCapabilities are what the charts of overlay are templated for:
// its targets' clusters' (checkTargetsKubernetes makes them one).
func (c *Config) TargetCapabilities(overlay string) kubeversion.Capabilities {
	if c == nil {
		return kubeversion.Defaults()
	}
	for _, t := range c.Targets {
		if t.Overlay == overlay {
			return c.Capabilities(t.Name, t.Environment)
		}
	}
	return c.Capabilities()
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
