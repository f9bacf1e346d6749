package snapshot

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/kplan-dev/kplan/internal/gitcli"
)

// FromWorkingTree loads the files under dir as git would commit them:
// tracked and untracked files, minus ignored ones, so build outputs and
// .git never enter a plan.
func FromWorkingTree(ctx context.Context, dir string) (*Snapshot, error) {
	s, err := OpenWorkingTree(ctx, dir, nil)
	if err != nil {
		return nil, err
	}
	return s, s.LoadAll(ctx)
}

// OpenWorkingTree opens the work tree at dir as a plan's head, lazily as
// Open does; blobs (nil: its own) may be shared with the base.
//
// A file git sees unmodified (git status, which compares what the file
// would commit as, after eol conversion and clean filters) is taken from
// the index: a clean work tree is exactly its commit, even when
// .gitattributes has checked files out with CRLF. Modified and untracked
// files are read from the disk as they are. Outside git, dir is read as
// it is on disk.
func OpenWorkingTree(ctx context.Context, dir string, blobs *Blobs) (*Snapshot, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("working tree %s: %w", dir, err)
	}
	top, err := workTreeTop(ctx, abs)
	if err != nil {
		if !errors.Is(err, errNotGit) {
			return nil, err
		}
		return diskTree(ctx, abs)
	}
	if blobs == nil {
		blobs = NewBlobs(top)
	}
	repo := gitcli.Repo{Dir: top}
	staged, err := repo.Run(ctx, "ls-files", "--stage", "-z")
	if err != nil {
		return nil, fmt.Errorf("list the index of %s: %w", top, err)
	}
	// --no-optional-locks: reading must not rewrite the user's index.
	status, err := repo.Run(ctx, "--no-optional-locks", "status", "--porcelain=v1", "-z",
		"--untracked-files=all", "--no-renames", "--ignore-submodules=all")
	if err != nil {
		return nil, fmt.Errorf("status of %s: %w", top, err)
	}
	// Y, the work tree column, says the disk differs from the index (or
	// "?" that the file is untracked, "U"/"D"... for conflicts).
	onDisk := map[string]bool{}
	for _, rec := range strings.Split(string(status), "\x00") {
		if len(rec) > 3 && rec[1] != ' ' {
			onDisk[rec[3:]] = true
		}
	}
	t := newTree()
	links := map[string]string{}
	for _, rec := range strings.Split(string(staged), "\x00") {
		if rec == "" {
			continue
		}
		meta, name, ok := strings.Cut(rec, "\t")
		f := strings.Fields(meta)
		if !ok || len(f) != 3 {
			return nil, fmt.Errorf("list the index of %s: unexpected line %q", top, rec)
		}
		switch {
		case tooDeep(name):
		case onDisk[name] || f[2] != "0":
			onDisk[name] = true
		case f[0] == "160000":
			// Submodules (commits) are not part of the tree's content.
		case f[0] == "120000":
			links[name] = f[1]
		default:
			t.files[name] = f[1]
		}
	}
	if err := t.readLinks(ctx, blobs, links); err != nil {
		return nil, fmt.Errorf("read symlinks of the index of %s: %w", top, err)
	}
	if err := t.readDisk(top, slices.Sorted(maps.Keys(onDisk)), blobs); err != nil {
		return nil, err
	}
	return t.open(ctx, WorkingTree, blobs)
}

// diskTree reads every file below root, for a directory outside git.
func diskTree(ctx context.Context, root string) (*Snapshot, error) {
	names, err := walkFiles(root)
	if err != nil {
		return nil, fmt.Errorf("list files in %s: %w", root, err)
	}
	t, blobs := newTree(), newMemBlobs()
	if err := t.readDisk(root, names, blobs); err != nil {
		return nil, err
	}
	return t.openAll(ctx, WorkingTree, blobs)
}

// readDisk adds the named files of the work tree at root, as they are on
// disk: content into blobs, symlinks as links. Names gone from the disk
// are skipped.
func (t *tree) readDisk(root string, names []string, blobs *Blobs) error {
	for _, name := range names {
		if tooDeep(name) {
			continue
		}
		p := filepath.Join(root, filepath.FromSlash(name))
		fi, err := os.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue // tracked but deleted in the work tree
		}
		if err != nil {
			return fmt.Errorf("stat %s: %w", p, err)
		}
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := readLink(root, name)
			if err != nil {
				return err
			}
			t.links[name] = target
		case fi.Mode().IsRegular() && fi.Size() > MaxFileSize:
			id, err := fileBlobID(p, fi.Size())
			if err != nil {
				return fmt.Errorf("read %s: %w", p, err)
			}
			blobs.putLarge(id, fi.Size())
			t.files[name] = id
		case fi.Mode().IsRegular():
			data, err := os.ReadFile(p)
			if err != nil {
				return fmt.Errorf("read %s: %w", p, err)
			}
			t.files[name] = blobs.put(data)
		}
	}
	return nil
}

// readLink reads the symlink name of the work tree at root. An absolute
// target inside the work tree is made relative, so that it resolves as it
// does on this disk; one outside stays absolute and leads nowhere.
func readLink(root, name string) (string, error) {
	p := filepath.Join(root, filepath.FromSlash(name))
	target, err := os.Readlink(p)
	if err != nil {
		return "", fmt.Errorf("read link %s: %w", p, err)
	}
	if filepath.IsAbs(target) {
		if r, err := filepath.Rel(root, target); err == nil && r != ".." && !strings.HasPrefix(r, "../") {
			up := strings.Repeat("../", strings.Count(name, "/"))
			return path.Clean(up + filepath.ToSlash(r)), nil
		}
	}
	return filepath.ToSlash(target), nil
}

var errNotGit = errors.New("not in a git work tree")

// workTreeTop returns the top of the git work tree dir is the top of, or
// errNotGit when dir is not in one.
func workTreeTop(ctx context.Context, dir string) (string, error) {
	top, err := gitcli.Repo{Dir: dir}.TopLevel(ctx)
	if err != nil {
		return "", fmt.Errorf("%s: %w", err, errNotGit)
	}
	if filepath.Clean(top) != filepath.Clean(dir) {
		if real, err := filepath.EvalSymlinks(dir); err != nil || filepath.Clean(real) != filepath.Clean(top) {
			return "", fmt.Errorf("%s is not the top of its git work tree (%s): %w", dir, top, errNotGit)
		}
	}
	return top, nil
}

func gitListFiles(ctx context.Context, dir string) ([]string, error) {
	out, err := gitcli.Repo{Dir: dir}.Run(ctx, "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	if err != nil {
		return nil, err
	}
	var names []string
	seen := map[string]bool{}
	for _, n := range strings.Split(string(out), "\x00") {
		if n != "" && !seen[n] {
			seen[n] = true
			names = append(names, n)
		}
	}
	return names, nil
}

func walkFiles(root string) ([]string, error) {
	var names []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == ".git" {
			return filepath.SkipDir
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		if d.IsDir() && tooDeep(filepath.ToSlash(rel)+"/x") {
			return filepath.SkipDir // what it holds is left out anyway
		}
		if d.IsDir() {
			return nil // WalkDir does not descend into symlinked dirs
		}
		names = append(names, filepath.ToSlash(rel))
		return nil
	})
	return names, err
}

// OpenDisk serves the work tree at dir (the top of its git work tree, or
// any directory outside git) as it is on disk, for `kplan render` and
// `kplan apply`: every file is readable, ignored ones included (a local
// secret.env a generator reads), while listings (Walk, so discovery)
// show the files git would commit. .git is not part of it.
func OpenDisk(ctx context.Context, dir string) (*FS, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("working tree %s: %w", dir, err)
	}
	d := &disk{root: abs}
	top, err := workTreeTop(ctx, abs)
	switch {
	case err == nil:
		d.root = top
		names, err := gitListFiles(ctx, top)
		if err != nil {
			return nil, fmt.Errorf("list files in %s: %w", top, err)
		}
		d.listed = map[string][]string{}
		seen := map[string]bool{}
		for _, n := range names {
			for p := n; p != "." && !seen[p]; p = path.Dir(p) {
				seen[p] = true
				d.listed[path.Dir(p)] = append(d.listed[path.Dir(p)], path.Base(p))
			}
		}
		for dir, ns := range d.listed {
			slices.Sort(ns)
			d.listed[dir] = ns
		}
	case !errors.Is(err, errNotGit):
		return nil, err
	}
	return newFS(d), nil
}

// disk is a store over a directory on disk.
type disk struct {
	root string
	// listed holds, by directory, the names git would commit there; nil
	// outside git, where listings are the disk's.
	listed map[string][]string
}

func (d *disk) path(rel string) string { return filepath.Join(d.root, filepath.FromSlash(rel)) }

func hidden(rel string) bool { return rel == ".git" || strings.HasPrefix(rel, ".git/") }

func (d *disk) lstat(rel string) (kind, string) {
	if hidden(rel) {
		return absent, ""
	}
	fi, err := os.Lstat(d.path(rel))
	switch {
	case err != nil:
		return absent, ""
	case fi.IsDir():
		return directory, ""
	case fi.Mode()&fs.ModeSymlink != 0:
		target, err := readLink(d.root, rel)
		if err != nil {
			return absent, ""
		}
		return symlink, target
	case fi.Mode().IsRegular():
		return regular, ""
	}
	return absent, "" // devices, sockets, pipes: not a render's input
}

func (d *disk) children(rel string) []string {
	if d.listed != nil {
		return d.listed[rel]
	}
	entries, err := os.ReadDir(d.path(rel))
	if err != nil {
		return nil
	}
	var names []string
	for _, e := range entries {
		if !hidden(path.Join(rel, e.Name())) {
			names = append(names, e.Name())
		}
	}
	return names
}

func (d *disk) read(rel string) ([]byte, error) {
	fi, err := os.Stat(d.path(rel))
	if err != nil {
		return nil, err
	}
	if fi.Size() > MaxFileSize {
		return nil, &TooLargeError{Size: fi.Size()}
	}
	return os.ReadFile(d.path(rel))
}

// fileBlobID is blobID of a file on disk, read in pieces: for a file too
// large to hold.
func fileBlobID(p string, size int64) (string, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha1.New()
	h.Write([]byte("blob " + strconv.FormatInt(size, 10) + "\x00"))
	if _, err := io.Copy(h, io.LimitReader(f, size)); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
