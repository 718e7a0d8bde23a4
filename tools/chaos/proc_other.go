//go:build !linux

package chaos

import (
	"os/exec"
	"syscall"
)

// childAttr has nothing to add where the parent's death cannot take the
// children with it.
func childAttr() *syscall.SysProcAttr { return nil }

// ownGroup leaves c in the verifier's process group; its context's end
// kills c alone, and Cmd.WaitDelay bounds the wait for its pipes.
func ownGroup(c *exec.Cmd) {}
