package action

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"sync"
)

// runnerLog is the Action's stdout, which the runner reads line by line
// for workflow commands (::error::, ::add-mask::, ::stop-commands::…,
// and ##[…] anywhere in a line). What kplan prints from the repository
// (the plan: paths, values, kustomize's notes) could hold such lines,
// and under pull_request_target it is a fork's: so everything is printed
// inside ::stop-commands::<token>, after which the runner acts on no
// command until the line ::<token>::. The token is random per run (128
// bits from crypto/rand): text committed before the run cannot name it.
// kplan's own commands go through Commands, which resumes processing for
// just that write.
//
// The runner keeps one stop state for stdout and stderr, so the log on
// stderr is inert while stopped too; but it reads the two pipes apart, so
// a log line could be read while one of kplan's commands has processing
// on: see inertLog.
type runnerLog struct {
	w     io.Writer
	token string

	mu      sync.Mutex
	stopped bool
}

func newRunnerLog(w io.Writer) (*runnerLog, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return nil, fmt.Errorf("a token for ::stop-commands::: %w", err)
	}
	return &runnerLog{w: w, token: hex.EncodeToString(b)}, nil
}

// Write prints text that came from the repository, with commands
// stopped.
func (l *runnerLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.stop(); err != nil {
		return 0, err
	}
	return l.w.Write(p)
}

// Commands is where kplan's own workflow commands go (go-githubactions
// writes each command in one Write): each is printed with processing
// resumed, and stopped again after it.
func (l *runnerLog) Commands() io.Writer { return commandWriter{l} }

type commandWriter struct{ l *runnerLog }

func (c commandWriter) Write(p []byte) (int, error) {
	l := c.l
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.resume(); err != nil {
		return 0, err
	}
	n, err := l.w.Write(p)
	if err != nil {
		return n, err
	}
	return n, l.stop()
}

// Close resumes processing: the runner keeps the stop state for the
// job's later steps, and the program's last error is a command.
func (l *runnerLog) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.resume()
}

// stop and resume print the commands that stop and resume processing;
// the caller holds l.mu.
func (l *runnerLog) stop() error {
	if l.stopped {
		return nil
	}
	l.stopped = true
	// Not through go-githubactions: the toolkit has no stop-commands, and
	// the token needs no escaping (hex).
	_, err := fmt.Fprintf(l.w, "::stop-commands::%s\n", l.token)
	return err
}

func (l *runnerLog) resume() error {
	if !l.stopped {
		return nil
	}
	l.stopped = false
	_, err := fmt.Fprintf(l.w, "::%s::\n", l.token)
	return err
}

// inertLog is the log's writer (slog's text handler, one record per
// Write). A record starts with "time=" and quotes newlines, so it never
// starts a line with "::"; but the runner takes "##[name]" anywhere in a
// line for a command (the legacy form), and a record may quote the
// repository (an overlay's path): a zero-width space keeps "##" from "[".
type inertLog struct{ w io.Writer }

func (l inertLog) Write(p []byte) (int, error) {
	if !bytes.Contains(p, []byte("##[")) {
		return l.w.Write(p)
	}
	if _, err := l.w.Write(bytes.ReplaceAll(p, []byte("##["), []byte("##\u200b["))); err != nil {
		return 0, err
	}
	return len(p), nil
}
