package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// leftMemberJSON is one instance of `group leave`.
type leftMemberJSON struct {
	InstanceID string `json:"instance_id"`
	MemberID   string `json:"member_id,omitempty"`
	Left       bool   `json:"left"`
	Error      string `json:"error,omitempty"`
}

// groupLeaveJSON is the -o json shape of `group leave`.
type groupLeaveJSON struct {
	Group   string           `json:"group"`
	Members []leftMemberJSON `json:"members"`
}

// newGroupLeaveCmd removes static members from a group (KIP-345), for a
// scale-down: a pipeline instance joins as the static member instance_id
// and does not leave the group when it stops.
func newGroupLeaveCmd(g *globals) *cobra.Command {
	var instances []string
	c := &cobra.Command{
		Use:   "leave GROUP --instance ID [--instance ID...]",
		Short: "Remove stopped static members from a group, for a scale-down",
		Long: `Remove members from a consumer group by their group.instance.id (KIP-345
LeaveGroup), so their partitions move to the remaining members at once.

A pipeline instance is a static member of its group (GROUP is the app_id,
ID its instance_id): when it stops, the group keeps its partitions for it
until session_timeout ends, so that a restart gets them back without a
rebalance. When an instance is stopped for good (a scale-down), remove it
with this command; leave_group_on_close: true in its config does the same
at shutdown. A running instance removed this way rejoins as a new member.

Prints whether each instance left; exits 1, naming them, if any was not a
member of the group.`,
		Example: "  eosctl group leave orders-enricher --instance worker-3 --instance worker-4",
		Args:    usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			group := args[0]
			if group == "" {
				return usageErrorf("GROUP must not be empty; it is the pipeline's app_id")
			}
			ids, err := instanceIDs(instances)
			if err != nil {
				return err
			}
			return g.withAdmin(cmd, func(ctx context.Context, adm *kadm.Client) error {
				resps, err := adm.LeaveGroup(ctx, kadm.LeaveGroup(group).InstanceIDs(ids...).Reason("eosctl group leave"))
				switch {
				case errors.Is(err, kerr.GroupIDNotFound):
					return fmt.Errorf("group %q does not exist, so instance(s) %s cannot leave it — check the group name (the pipeline's app_id)", group, quoteAll(ids))
				case err != nil:
					return kafkaErr(fmt.Sprintf("remove instance(s) %s from group %q", quoteAll(ids), group), err)
				}
				res, failed := leaveResults(group, ids, resps)
				t := newTable("INSTANCE", "MEMBER ID", "RESULT")
				for _, m := range res.Members {
					result := "left"
					if !m.Left {
						result = m.Error
					}
					t.add(m.InstanceID, orDash(m.MemberID), result)
				}
				if err := g.render(cmd.OutOrStdout(), res, t); err != nil {
					return err
				}
				return failed
			})
		},
	}
	c.Flags().StringSliceVar(&instances, "instance", nil, "group.instance.id (the pipeline's instance_id) to remove (repeatable)")
	_ = c.MarkFlagRequired("instance")
	return c
}

// instanceIDs checks the --instance values and drops duplicates, keeping
// the order given.
func instanceIDs(values []string) ([]string, error) {
	empty := usageErrorf("--instance must not be empty; give the instance_id of each stopped pipeline instance")
	var ids []string
	for _, id := range values {
		if strings.TrimSpace(id) == "" {
			return nil, empty
		}
		if !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return nil, empty
	}
	return ids, nil
}

// leaveResults turns the broker's answer into one row per instance, sorted,
// and an error naming every instance that did not leave (nil if all did).
func leaveResults(group string, ids []string, resps kadm.LeaveGroupResponses) (groupLeaveJSON, error) {
	res := groupLeaveJSON{Group: group, Members: []leftMemberJSON{}}
	var unknown, other []string
	for _, id := range ids {
		m := leftMemberJSON{InstanceID: id}
		r, ok := resps[id]
		switch {
		case !ok:
			m.Error = "no answer for this instance"
			other = append(other, fmt.Sprintf("%q (%s)", id, m.Error))
		case r.Err != nil:
			m.MemberID, m.Error = r.MemberID, r.Err.Error()
			if errors.Is(r.Err, kerr.UnknownMemberID) {
				unknown = append(unknown, id)
			} else {
				other = append(other, fmt.Sprintf("%q (%v)", id, r.Err))
			}
		default:
			m.MemberID, m.Left = r.MemberID, true
		}
		res.Members = append(res.Members, m)
	}
	slices.SortFunc(res.Members, func(a, b leftMemberJSON) int { return strings.Compare(a.InstanceID, b.InstanceID) })
	var errs []error
	if len(unknown) > 0 {
		errs = append(errs, fmt.Errorf("group %q has no static member %s (%w) — check the group name (the pipeline's app_id) and the instance ids (each instance's instance_id); a group that does not exist answers the same",
			group, quoteAll(unknown), kerr.UnknownMemberID))
	}
	if len(other) > 0 {
		errs = append(errs, fmt.Errorf("instance(s) %s did not leave group %q", strings.Join(other, ", "), group))
	}
	return res, errors.Join(errs...)
}

// quoteAll quotes each id and joins them with commas.
func quoteAll(ids []string) string {
	q := make([]string, len(ids))
	for i, id := range ids {
		q[i] = fmt.Sprintf("%q", id)
	}
	return strings.Join(q, ", ")
}
