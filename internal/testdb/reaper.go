package testdb

import (
	"fmt"
	"io"
	"os/exec"
	"syscall"
	"time"
)

// reaperScript waits until its stdin, a pipe only the test process can write,
// reaches EOF: that happens however the test process ends (normal exit,
// panic, test timeout, SIGKILL). It then fast-stops the cluster's postmaster
// if one is still running (checking the PID really is a postgres process, in
// case a crashed server left a stale pid file) and removes the directory.
const reaperScript = `cat >/dev/null
dir=$1
pidfile="$dir/pgdata/postmaster.pid"
if [ -f "$pidfile" ] && read -r pid < "$pidfile" && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = postgres ]; then
	kill -INT "$pid"
	n=0
	while kill -0 "$pid" 2>/dev/null && [ "$n" -lt 60 ]; do sleep 1; n=$((n+1)); done
fi
rm -rf "$dir"
`

// reaperExitTimeout bounds release: the script needs up to a minute only
// when it has to stop a server itself.
const reaperExitTimeout = 90 * time.Second

// reaper is a watchdog process that removes a throwaway cluster once the
// test process has gone, so clusters never accumulate when a package does
// not call Main or a run is interrupted.
type reaper struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
}

func startReaper(dir string) (*reaper, error) {
	cmd := exec.Command("/bin/sh", "-c", reaperScript, "agentbox-testdb-reaper", dir)
	// Own process group: a terminal ^C reaches the test process but must not
	// also kill the watchdog that cleans up after it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("reaper: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("reaper: %w", err)
	}
	return &reaper{cmd: cmd, stdin: stdin}, nil
}

// release lets the reaper run now (it finds nothing left to do after a clean
// shutdown) and waits for it, so its outcome is reported.
func (r *reaper) release() error {
	if err := r.stdin.Close(); err != nil {
		return fmt.Errorf("reaper: %w", err)
	}
	done := make(chan error, 1)
	go func() { done <- r.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("reaper: %w", err)
		}
		return nil
	case <-time.After(reaperExitTimeout):
		return fmt.Errorf("reaper (PID %d) still running after %v", r.cmd.Process.Pid, reaperExitTimeout)
	}
}
