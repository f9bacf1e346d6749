// Command prebuild builds (or finds in the cache) the etcd and kube-apiserver
// binaries that testcluster uses and prints their directory. Running it before
// `go test ./...` keeps the first, minutes-long build out of any test's
// timeout; its output can also be exported as KPLAN_CLUSTER_BIN.
//
//	go run ./internal/testcluster/prebuild
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/kplan-dev/kplan/internal/testcluster"
)

func main() {
	start := time.Now()
	// Say it before the silence: the first build takes minutes.
	fmt.Fprintln(os.Stderr, "prebuild: etcd and kube-apiserver for the tests, from tools/cluster/go.mod (first time on a machine: about 4 minutes on 2 cores; then cached in ~/.cache/kplan)")
	dir, err := testcluster.Binaries(context.Background())
	if err != nil {
		fmt.Fprintln(os.Stderr, "prebuild:", err)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "prebuild: cluster binaries ready in %s\n", time.Since(start).Round(time.Millisecond))
	fmt.Println(dir)
}
