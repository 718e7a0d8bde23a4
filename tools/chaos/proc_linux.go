package chaos

import (
	"os/exec"
	"syscall"
)

// childAttr makes a child process die with the verifier, so an
// interrupted run leaves no workers or broker behind.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// ownGroup runs c in a process group of its own and has its context's
// end kill the whole group, not c alone, so that no grandchild keeps
// c's output pipes open and holds Wait past the deadline.
func ownGroup(c *exec.Cmd) {
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	c.Cancel = func() error { return syscall.Kill(-c.Process.Pid, syscall.SIGKILL) }
}
