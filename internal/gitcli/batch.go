package gitcli

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"sync"
)

// Batch is one long-lived `git cat-file --batch` reading blobs of a
// repository: a plan reads files in dozens of small batches (one per
// Flux Kustomization, per side), and a git process each cost more CPU,
// mostly in the kernel, than reading them. The process starts at the
// first Read, serves one Read at a time, and ends with Close (a later
// Read starts another); a Read that fails or is cancelled ends it, so
// a half-read answer never reaches the next Read.
type Batch struct {
	repo Repo

	mu     sync.Mutex
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	out    *bufio.Reader
	stderr *bytes.Buffer
	buf    []byte
}

// NewBatch returns a Batch reading r's objects; it starts no process.
func (r Repo) NewBatch() *Batch { return &Batch{repo: r} }

// Read reads the objects ids in order, calling fn with each one's id,
// size and content. A content over limit bytes is skipped (fn gets it
// nil, with its size). Unless keep, data is only valid during the call.
func (b *Batch) Read(ctx context.Context, ids []string, limit int64, keep bool, fn func(id string, data []byte, size int64)) error {
	if len(ids) == 0 {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return err
	}
	if b.cmd == nil {
		if err := b.start(); err != nil {
			return err
		}
	}
	// The ids are written while the answers are read: git answers each
	// as it reads it, and would block on a full pipe of answers while
	// kplan blocks on a full pipe of questions.
	wrote := make(chan error, 1)
	stdin := b.stdin
	go func() {
		w := bufio.NewWriterSize(stdin, 1<<14)
		for _, id := range ids {
			if _, err := w.WriteString(id + "\n"); err != nil {
				wrote <- err
				return
			}
		}
		wrote <- w.Flush()
	}()
	proc := b.cmd.Process
	stop := context.AfterFunc(ctx, func() { proc.Kill() })
	var err error
	for range ids {
		if err = b.readObject(limit, keep, fn); err != nil {
			break
		}
	}
	stopped := stop()
	if err != nil || !stopped {
		// The answers are out of step with the questions, or the process
		// was killed: end it; the writer's pipe breaks.
		stderr := b.stderr
		b.end(true)
		<-wrote
		if !stopped {
			return ctx.Err()
		}
		if msg := strings.TrimSpace(stderr.String()); msg != "" {
			err = fmt.Errorf("%w: %s", err, msg)
		}
		return fmt.Errorf("git cat-file in %s: %w", b.repo.Dir, err)
	}
	if werr := <-wrote; werr != nil {
		b.end(true)
		return fmt.Errorf("git cat-file in %s: %w", b.repo.Dir, werr)
	}
	return nil
}

func (b *Batch) start() error {
	cmd := exec.Command("git", "cat-file", "--batch")
	cmd.Dir = b.repo.Dir
	cmd.Env = append(append(cmd.Environ(), "GIT_TERMINAL_PROMPT=0", "LC_ALL=C"), b.repo.Env...)
	b.stderr = &bytes.Buffer{}
	cmd.Stderr = b.stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("git cat-file: %w", err)
	}
	b.cmd, b.stdin, b.out = cmd, stdin, bufio.NewReaderSize(stdout, 1<<16)
	return nil
}

// end ends the process, killing it when it may be mid-answer; b.mu is
// held.
func (b *Batch) end(kill bool) error {
	if b.cmd == nil {
		return nil
	}
	if kill {
		b.cmd.Process.Kill()
	}
	b.stdin.Close() // git exits at the end of its input
	err := b.cmd.Wait()
	b.cmd, b.stdin, b.out, b.buf = nil, nil, nil, nil
	if kill {
		return nil
	}
	return err
}

// Close ends the process, if one runs.
func (b *Batch) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.end(false); err != nil {
		return fmt.Errorf("git cat-file in %s: %w", b.repo.Dir, err)
	}
	return nil
}

// readObject reads one "<id> <type> <size>\n<content>\n" answer into a
// new slice (keep) or into b.buf; content over limit is skipped.
func (b *Batch) readObject(limit int64, keep bool, fn func(id string, data []byte, size int64)) error {
	header, err := b.out.ReadString('\n')
	if err != nil {
		return fmt.Errorf("read header: %w", err)
	}
	f := strings.Fields(header)
	if len(f) != 3 {
		return errors.New("object " + strings.TrimSpace(header)) // "<id> missing"
	}
	n, err := strconv.ParseInt(f[2], 10, 64)
	if err != nil || n < 0 {
		return fmt.Errorf("bad header %q", header)
	}
	if n > limit {
		if _, err := io.CopyN(io.Discard, b.out, n+1); err != nil {
			return fmt.Errorf("read object %s: %w", f[0], err)
		}
		fn(f[0], nil, n)
		return nil
	}
	var data []byte
	if keep {
		data = make([]byte, n+1) // content and its trailing newline
	} else {
		if int64(cap(b.buf)) < n+1 {
			b.buf = make([]byte, n+1)
		}
		data = b.buf[:n+1]
	}
	if _, err := io.ReadFull(b.out, data); err != nil {
		return fmt.Errorf("read object %s: %w", f[0], err)
	}
	fn(f[0], data[:n:n], n)
	return nil
}
