package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func TestVersion(t *testing.T) {
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), []string{"--version"}, func(string) string { return "" }, &stdout, &stderr)
	if err != nil || !strings.HasPrefix(stdout.String(), "kplan-webhook ") {
		t.Errorf("kplan-webhook --version: %v %q %q", err, stdout.String(), stderr.String())
	}
}
