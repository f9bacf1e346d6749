// Package test holds kplan's end-to-end tests: the binaries and packages
// run against real git over HTTP, a real kube-apiserver and etcd, and a
// local GitHub API, as a user would run them.
package test
