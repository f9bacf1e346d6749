package gitbase

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// A tree or repository is a directory that is only ever created whole
// (made under a temporary name, then renamed into place) and removed
// whole (renamed to a temporary name, then deleted), so its path holds
// a complete directory or nothing, whatever process crashes when. A
// Cache that serves one takes a shared flock on it, kept until Close,
// and sets its modification time to now: that is when it was last used.
// Prune takes the lock exclusively, without waiting, so it never removes
// what a Cache holds, in this process or another.

// placeAttempts bounds the rounds of "look, then make" that a Prune
// running at the same moment can send back.
const placeAttempts = 5

// trashPrefix names what Prune moved away to delete.
const trashPrefix = ".prune-"

// hold takes a shared lock on the directory at path and keeps it until
// Close. false when there is no directory there (any more).
func (c *Cache) hold(ctx context.Context, path string) (bool, error) {
	c.mu.Lock()
	_, ok := c.held[path]
	c.mu.Unlock()
	if ok {
		touch(path)
		return true, nil
	}
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if err := flock(ctx, f, syscall.LOCK_SH); err != nil && !unsupported(err) {
		f.Close()
		return false, fmt.Errorf("lock %s: %w", path, err)
	}
	// A Prune may have moved it away between the open and the lock.
	if fi, err := f.Stat(); err != nil || !sameFile(fi, path) {
		f.Close()
		return false, nil
	}
	touch(path)
	c.keep(path, f)
	return true, nil
}

// place makes the directory at path with fill, under a temporary name
// beside it (locked, so that no Prune removes it half-made), then
// renames it into place and holds it. false when another process placed
// it first: the caller holds theirs.
func (c *Cache) place(ctx context.Context, path string, fill func(tmp string) error) (bool, error) {
	parent := filepath.Dir(path)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return false, err
	}
	tmp, err := os.MkdirTemp(parent, ".tmp-"+shortName(filepath.Base(path))+"-")
	if err != nil {
		return false, err
	}
	defer os.RemoveAll(tmp) // a no-op once renamed
	f, err := os.Open(tmp)
	if err != nil {
		return false, err
	}
	if err := flock(ctx, f, syscall.LOCK_SH); err != nil && !unsupported(err) {
		f.Close()
		return false, fmt.Errorf("lock %s: %w", tmp, err)
	}
	if err := fill(tmp); err != nil {
		f.Close()
		return false, err
	}
	if err := os.Rename(tmp, path); err != nil {
		f.Close()
		if _, serr := os.Stat(path); serr == nil {
			return false, nil // another process placed it first
		}
		return false, err
	}
	c.keep(path, f)
	return true, nil
}

// keep records f, locked, as this Cache's handle on path.
func (c *Cache) keep(path string, f *os.File) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.held[path] != nil {
		f.Close() // two repositories share the commit: one handle is enough
		return
	}
	c.held[path] = f
}

// touch records a use. A cache on a read-only disk still serves, and
// Prune cannot remove from it anyway: the error is of no consequence.
func touch(path string) {
	now := time.Now()
	_ = os.Chtimes(path, now, now)
}

func sameFile(fi os.FileInfo, path string) bool {
	pi, err := os.Stat(path)
	return err == nil && os.SameFile(fi, pi)
}

func shortName(name string) string {
	name = strings.TrimSuffix(name, ".git")
	if len(name) > 12 {
		name = name[:12]
	}
	return name
}

// flock takes how (LOCK_SH, LOCK_EX) on f, waiting as ctx allows: a
// Prune holds a directory exclusively only while it moves it away.
func flock(ctx context.Context, f *os.File, how int) error {
	for {
		err := syscall.Flock(int(f.Fd()), how|syscall.LOCK_NB)
		if err == nil {
			return nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// unsupported reports a file system without flock: the cache serves
// from it all the same, and Prune, which cannot lock either, removes
// nothing from it.
func unsupported(err error) bool {
	return errors.Is(err, errors.ErrUnsupported) || errors.Is(err, syscall.ENOLCK)
}

// Prune removes the trees no Cache used for longer than olderThan, then
// the bare repositories unused as long that hold none of the trees left
// (a tag resolves from its repository, without the network, as long as
// a tree of it is kept). What a Cache holds is never removed; neither
// are the leftovers of a crash, until they are as old. removed counts
// the trees and repositories removed; an error names what could not be,
// and the rest is pruned regardless. It needs no network, nor a policy:
// New(dir, nil).Prune prunes dir.
func (c *Cache) Prune(ctx context.Context, olderThan time.Duration) (removed int, err error) {
	if olderThan <= 0 {
		return 0, fmt.Errorf("git cache %s: prune needs a positive age, not %v", c.dir, olderThan)
	}
	cutoff := time.Now().Add(-olderThan)
	var errs []error
	var kept []string // the commits of the trees left
	trees := filepath.Join(c.dir, "trees")
	entries, err := readDir(trees)
	if err != nil {
		return 0, err
	}
	for _, e := range entries {
		if err := ctx.Err(); err != nil {
			return removed, err
		}
		gone, err := remove(filepath.Join(trees, e.Name()), cutoff, nil)
		if err != nil {
			errs = append(errs, err)
		}
		switch {
		case gone && !strings.HasPrefix(e.Name(), "."):
			removed++
		case !gone && hexRe.MatchString(e.Name()):
			kept = append(kept, e.Name())
		}
	}
	repos := filepath.Join(c.dir, "repos")
	if entries, err = readDir(repos); err != nil {
		return removed, errors.Join(append(errs, err)...)
	}
	for _, e := range entries {
		if err := ctx.Err(); err != nil {
			return removed, err
		}
		var holds func(string) (bool, error)
		if !strings.HasPrefix(e.Name(), ".") {
			holds = func(repo string) (bool, error) { return c.holdsAny(ctx, repo, kept) }
		}
		gone, err := remove(filepath.Join(repos, e.Name()), cutoff, holds)
		if err != nil {
			errs = append(errs, err)
		}
		if gone && !strings.HasPrefix(e.Name(), ".") {
			removed++
		}
	}
	return removed, errors.Join(errs...)
}

// lockToRemove takes f exclusively, trying a few times: a Cache's shared
// lock is held until it closes, but any process this one forks (a git
// command) holds every descriptor for the moment before it execs, and
// the lock with it; on a loaded machine that moment was long enough to
// make Prune skip a tree no Cache held.
func lockToRemove(f *os.File) error {
	var err error
	for range 10 {
		if err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err == nil ||
			!(errors.Is(err, syscall.EWOULDBLOCK) || errors.Is(err, syscall.EINTR)) {
			return err
		}
		time.Sleep(20 * time.Millisecond)
	}
	return err
}

func readDir(dir string) ([]os.DirEntry, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("git cache: %w", err)
	}
	return entries, nil
}

// remove removes the directory at path if nothing holds it, it was last
// used before cutoff, and keep (if set) does not say to keep it. What a
// Prune that crashed had moved away goes a minute later whatever the
// age (nothing serves it; the minute spares the one a Prune is making).
func remove(path string, cutoff time.Time, keep func(string) (bool, error)) (bool, error) {
	if strings.HasPrefix(filepath.Base(path), trashPrefix) {
		cutoff = time.Now().Add(-time.Minute)
	}
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("git cache: %w", err)
	}
	defer f.Close()
	if err := lockToRemove(f); err != nil {
		if errors.Is(err, syscall.EWOULDBLOCK) || errors.Is(err, syscall.EINTR) {
			return false, nil // in use
		}
		return false, fmt.Errorf("git cache: lock %s: %w", path, err)
	}
	fi, err := f.Stat()
	if err != nil {
		return false, fmt.Errorf("git cache: %w", err)
	}
	if !fi.IsDir() || !fi.ModTime().Before(cutoff) || !sameFile(fi, path) {
		return false, nil
	}
	if keep != nil {
		if k, err := keep(path); err != nil || k {
			return false, err
		}
	}
	// Moved away first: its path is never a half-removed directory.
	parent, name := filepath.Split(path)
	trash, err := os.MkdirTemp(parent, trashPrefix+shortName(name)+"-")
	if err != nil {
		return false, fmt.Errorf("git cache: %w", err)
	}
	// Locked while it is deleted, so that another Prune leaves it alone.
	t, err := os.Open(trash)
	if err != nil {
		os.Remove(trash)
		return false, fmt.Errorf("git cache: %w", err)
	}
	defer t.Close()
	if err := syscall.Flock(int(t.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		os.Remove(trash)
		return false, fmt.Errorf("git cache: lock %s: %w", trash, err)
	}
	if err := os.Rename(path, filepath.Join(trash, name)); err != nil {
		os.Remove(trash)
		return false, fmt.Errorf("git cache: remove %s: %w", path, err)
	}
	f.Close()
	if err := os.RemoveAll(trash); err != nil {
		// Never served again; the next Prune finishes it.
		return true, fmt.Errorf("git cache: remove %s: %w", path, err)
	}
	return true, nil
}

// holdsAny reports whether the bare repository has any of commits.
func (c *Cache) holdsAny(ctx context.Context, repo string, commits []string) (bool, error) {
	if len(commits) == 0 {
		return false, nil
	}
	cmd := exec.CommandContext(ctx, "git", "cat-file", "--batch-check")
	cmd.Dir = repo
	cmd.Env = append(cmd.Environ(), c.git("").Env...)
	cmd.Stdin = strings.NewReader(strings.Join(commits, "\n") + "\n")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return false, fmt.Errorf("git cache: kept %s, cannot list its commits: git cat-file: %s: %w", repo, strings.TrimSpace(stderr.String()), err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if line != "" && !strings.HasSuffix(line, " missing") {
			return true, nil
		}
	}
	return false, nil
}
