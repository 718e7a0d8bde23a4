package main

import (
	"github.com/spf13/cobra"
)

// newAppCmd groups the commands that look at one pipeline application as
// a whole: its group, its internal topics and its local state.
func newAppCmd(g *globals) *cobra.Command {
	return newGroupingCmd("app", "Inspect a pipeline application: its group, internal topics and state stores",
		newAppDescribeCmd(g))
}
