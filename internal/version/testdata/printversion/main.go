// printversion prints version.String(); TestLdflags builds it with the
// linker flags the release uses.
package main

import (
	"fmt"

	"github.com/kplan-dev/kplan/internal/version"
)

func main() { fmt.Print(version.String()) }
