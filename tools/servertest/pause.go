package servertest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The variables that name a command printing a running server's pid, for
// the tests that pause it (SIGSTOP): `pg.sh pid`, `redis.sh pid`.
const (
	EnvPostgresPIDCmd = "EOS_POSTGRES_PID_CMD"
	EnvRedisPIDCmd    = "EOS_REDIS_PID_CMD"
)

// ServerPID runs the command in env and returns the pid it prints; t
// skips when env is unset, and fails when the command does.
func ServerPID(t testing.TB, env, example string) int {
	t.Helper()
	line := os.Getenv(env)
	if line == "" {
		t.Skipf("%s is not set: this test pauses the server (SIGSTOP), so it needs its pid; e.g. %s=%q", env, env, example)
	}
	out, err := exec.Command("sh", "-c", line).Output()
	if err != nil {
		t.Fatalf("%s (%s): %v", line, env, err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil || pid <= 1 {
		t.Fatalf("%s (%s) printed %q, want a pid", line, env, out)
	}
	return pid
}

// Pause stops the server pid and every process under it (a postmaster's
// backends lead process groups of their own) with SIGSTOP, and fails t
// unless the kernel reports each of them stopped (state T in
// /proc/PID/stat). It returns how many processes it stopped and resume,
// which sends them SIGCONT once; t's cleanup resumes too, so a failed
// test never leaves the server stopped.
func Pause(t testing.TB, pid int) (stopped int, resume func()) {
	t.Helper()
	var procs []int
	done := false
	resume = func() {
		if !done {
			done = true
			for _, p := range procs {
				_ = syscall.Kill(p, syscall.SIGCONT)
			}
		}
	}
	t.Cleanup(resume)
	// The parent first, so it forks no child that the scan misses.
	seen := map[int]bool{}
	for todo := []int{pid}; len(todo) > 0; todo = children(todo) {
		for _, p := range todo {
			if seen[p] {
				continue
			}
			seen[p] = true
			if err := syscall.Kill(p, syscall.SIGSTOP); err != nil && p == pid {
				t.Fatalf("SIGSTOP %d: %v", p, err)
			}
			procs = append(procs, p)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for _, p := range procs {
		for {
			st, err := procField(p, 3)
			if err != nil || st == "T" || st == "Z" { // a process gone meanwhile runs no more either
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("pid %d of the paused server (pid %d) is in state %q, want T (stopped)", p, pid, st)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	if st, err := procField(pid, 3); err != nil || st != "T" {
		t.Fatalf("server pid %d: state %q (%v) after SIGSTOP, want T", pid, st, err)
	}
	return len(procs), resume
}

// Stopped reports whether the kernel reports pid stopped (state T).
func Stopped(pid int) bool {
	st, err := procField(pid, 3)
	return err == nil && st == "T"
}

// children lists the processes whose parent is one of parents.
func children(parents []int) []int {
	want := map[string]bool{}
	for _, p := range parents {
		want[strconv.Itoa(p)] = true
	}
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	var out []int
	for _, d := range dirs {
		p, err := strconv.Atoi(filepath.Base(d))
		if err != nil {
			continue
		}
		if pp, err := procField(p, 4); err == nil && want[pp] {
			out = append(out, p)
		}
	}
	return out
}

// procField is field n (1-based, as in proc(5): 3 is the state, 4 the
// parent) of /proc/PID/stat.
func procField(pid, n int) (string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return "", fmt.Errorf("cannot parse /proc/%d/stat: %q", pid, s)
	}
	f := strings.Fields(s[i+1:])
	if n-3 < 0 || n-3 >= len(f) {
		return "", fmt.Errorf("/proc/%d/stat has no field %d", pid, n)
	}
	return f[n-3], nil
}
