package main

import (
	"github.com/spf13/cobra"
)

// newGroupCmd groups the consumer group commands.
func newGroupCmd(g *globals) *cobra.Command {
	return newGroupingCmd("group", "Inspect and scale down consumer groups of exactly-once pipelines",
		newGroupLagCmd(g), newGroupLeaveCmd(g))
}
