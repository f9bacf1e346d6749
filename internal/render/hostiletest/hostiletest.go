// Package hostiletest makes the hostile inputs that kplan's render budgets
// are tested with: an alias bomb, a very large file, a very deep path,
// and errors that quote Secret values. Tests of several packages (kplan
// diff, the webhook, render) share them.
package hostiletest

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strings"
)

// AliasBomb is a "billion laughs" ConfigMap: 9 levels of 10 aliases,
// 10^9 scalars from about 600 bytes.
func AliasBomb(name string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\nlol:\n", name)
	b.WriteString("  l0: &l0 [" + strings.TrimSuffix(strings.Repeat(`"lol",`, 10), ",") + "]\n")
	for i := 1; i < 9; i++ {
		fmt.Fprintf(&b, "  l%d: &l%d [%s]\n", i, i, strings.TrimSuffix(strings.Repeat(fmt.Sprintf("*l%d,", i-1), 10), ","))
	}
	return b.String()
}

// WriteBigFile writes at p a ConfigMap named name of size bytes, most of
// them one data value, in pieces: the test holds none of it.
func WriteBigFile(p, name string, size int64) error {
	f, err := os.Create(p)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	head := fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\ndata:\n  big: ", name)
	w.WriteString(head)
	chunk := []byte(strings.Repeat("x", 1<<16))
	for left := size - int64(len(head)) - 1; left > 0; {
		n := min(left, int64(len(chunk)))
		w.Write(chunk[:n])
		left -= n
	}
	w.WriteString("\n")
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// DeepDir is a relative directory path depth directories deep.
func DeepDir(depth int) string {
	return strings.TrimSuffix(strings.Repeat("d/", depth), "/")
}

// Commit adds a commit on branch of the git repository at dir with files
// (path -> content) changed over its tip, with git fast-import: it takes
// paths no file system can hold (a 10,000-deep directory), as a pull
// request's commit can. It returns the new commit.
func Commit(ctx context.Context, dir, branch, msg string, files map[string]string) (string, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "commit refs/heads/%s\n", branch)
	b.WriteString("committer kplan test <test@kplan.invalid> 1700000000 +0000\n")
	fmt.Fprintf(&b, "data %d\n%s\n", len(msg), msg)
	fmt.Fprintf(&b, "from refs/heads/%s^0\n", branch)
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(&b, "M 100644 inline %s\ndata %d\n%s\n", n, len(files[n]), files[n])
	}
	cmd := exec.CommandContext(ctx, "git", "fast-import", "--quiet")
	cmd.Dir = dir
	cmd.Stdin = strings.NewReader(b.String())
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("git fast-import: %v: %s", err, out)
	}
	out, err := exec.CommandContext(ctx, "git", "-C", dir, "rev-parse", "refs/heads/"+branch).Output()
	if err != nil {
		return "", fmt.Errorf("git rev-parse %s: %w", branch, err)
	}
	return strings.TrimSpace(string(out)), nil
}
