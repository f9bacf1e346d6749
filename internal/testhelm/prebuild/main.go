// Command prebuild builds (or finds in the cache) the helm and kustomize
// commands the Helm tests use and prints their directory, keeping the
// first, minutes-long build out of any test's timeout.
//
//	go run ./internal/testhelm/prebuild
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/kplan-dev/kplan/internal/testhelm"
)

func main() {
	fmt.Fprintln(os.Stderr, "prebuild: helm and kustomize for the Helm tests, from tools/helm/go.mod (first time: a few minutes, reusing the Kubernetes packages the cluster build compiled; then cached in ~/.cache/kplan)")
	dir, err := testhelm.Binaries(context.Background())
	if err != nil {
		fmt.Fprintln(os.Stderr, "prebuild:", err)
		os.Exit(1)
	}
	fmt.Println(dir)
}
