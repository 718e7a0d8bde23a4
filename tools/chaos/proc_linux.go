package chaos

import "syscall"

// childAttr makes a child process die with the verifier, so an
// interrupted run leaves no workers or broker behind.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
