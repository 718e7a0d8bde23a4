//go:build !linux

package chaos

import "syscall"

// childAttr has nothing to add where the parent's death cannot take the
// children with it.
func childAttr() *syscall.SysProcAttr { return nil }
