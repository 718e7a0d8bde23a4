package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/internal/runcfg"
	"github.com/eosflow/eosflow/topology"
)

// Kinds of internal topics, as their names end: "<app>-<name>-<kind>",
// and "<app>-eos-offsets" for the offsets mirror of an exactly-once app.
const (
	kindChangelog   = "changelog"
	kindRepartition = "repartition"
	kindOffsets     = "offsets"
)

// internalTopicJSON is one internal topic of `app describe`: a store's
// changelog, a repartition topic or the offsets mirror, with the settings
// its correctness depends on.
type internalTopicJSON struct {
	Topic             string             `json:"topic"`
	Kind              string             `json:"kind"` // changelog, repartition or offsets
	Name              string             `json:"name"` // the store (changelog) or node (repartition); "" for offsets
	Partitions        int                `json:"partitions"`
	ReplicationFactor int                `json:"replication_factor"`
	CleanupPolicy     string             `json:"cleanup_policy"`
	MinInsyncReplicas string             `json:"min_insync_replicas"`
	EndOffsets        []partitionEndJSON `json:"end_offsets"`
	Problems          []string           `json:"problems,omitempty"`
}

// partitionEndJSON is one partition of an internal topic. A repartition
// topic is also an input, so its committed offset and lag are in the
// group's inputs.
type partitionEndJSON struct {
	Partition int32 `json:"partition"`
	Leader    int32 `json:"leader"`     // -1 when the partition has none
	EndOffset int64 `json:"end_offset"` // the high watermark; -1 when unknown
}

// appMemberJSON is one member of the app's group and the tasks (input
// partitions) it owns.
type appMemberJSON struct {
	MemberID   string             `json:"member_id"`
	InstanceID string             `json:"instance_id,omitempty"`
	ClientID   string             `json:"client_id"`
	Host       string             `json:"host"`
	Tasks      map[string][]int32 `json:"tasks"`
}

// appGroupJSON is the app's consumer group: who runs which tasks, and how
// far each input partition has committed.
type appGroupJSON struct {
	Group    string             `json:"group"`
	State    string             `json:"state"` // as Kafka reports it; "Dead" when the group does not exist
	Members  []appMemberJSON    `json:"members"`
	TotalHWM int64              `json:"total_lag_hwm"`
	TotalLSO int64              `json:"total_lag_lso"`
	Inputs   []partitionLagJSON `json:"inputs"`
}

// appDescribeJSON is the -o json shape of `app describe`.
type appDescribeJSON struct {
	App            string              `json:"app"`
	InternalTopics []internalTopicJSON `json:"internal_topics"`
	Group          appGroupJSON        `json:"group"`
	StateDir       string              `json:"state_dir"`
	Stores         []storeStateJSON    `json:"stores"`
}

// newAppDescribeCmd shows everything the cluster and the local state
// directory know about one app, so an operator needs no topology to see
// whether its state is healthy and caught up.
func newAppDescribeCmd(g *globals) *cobra.Command {
	var stateDir string
	c := &cobra.Command{
		Use:   "describe [APP_ID]",
		Short: "Show an app's internal topics, group members and tasks, lag, and the restore state of its local stores",
		Long: `Show, for the pipeline whose app_id is APP_ID (default: app_id of --config,
or EOS_APP_ID):

  - its internal topics: the changelogs of its state stores (APP-STORE-changelog,
    which must be compacted) and its repartition topics (APP-NODE-repartition,
    which must be cleanup.policy=delete) and, exactly-once, the mirror of its
    committed input offsets (APP-eos-offsets, compacted), with partitions,
    replication factor, cleanup.policy, min.insync.replicas, and each
    partition's end offset (high watermark)
  - its consumer group (the group id is the app_id): state, members with their
    instance ids and the tasks (input partitions) each owns
  - the committed offset and lag of every input partition, repartition topics
    included, against the last stable offset and the high watermark (below)
  - the persistent (pebble) stores under --state-dir/APP_ID/INSTANCE/: for
    each, the changelog offset it applied and whether it is restored or how
    many committed changelog records it is behind. A store a running
    instance has open cannot be read and is shown as "in use".

Topics are matched by name, so an app "orders" would also claim the topics of
an app "orders-eu"; those are left out when a group "orders-eu" exists.

` + lagHelp,
		Example: "  eosctl app describe orders\n  eosctl app describe --config pipeline.yaml -o json\n  eosctl app describe orders --state-dir /var/lib/eosflow",
		Args:    usageArgs(cobra.MaximumNArgs(1)),
		// An app id is not a file; completing it would need the brokers.
		ValidArgsFunction: cobra.NoFileCompletions,
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := g.pipelineConfig()
			if err != nil {
				return err
			}
			if len(args) == 1 {
				cfg.AppID = args[0]
			}
			if cfg.AppID == "" {
				return usageErrorf("name the app: give APP_ID, or --config with app_id (or EOS_APP_ID)")
			}
			if err := validTopicName(cfg.AppID); err != nil {
				return usageErrorf("APP_ID %q cannot be an app_id: %v", cfg.AppID, err)
			}
			if cmd.Flags().Changed("state-dir") {
				if stateDir == "" {
					return usageErrorf("--state-dir must not be empty")
				}
				cfg.StateDir = stateDir
			}
			ctx, cancel := g.commandContext(cmd)
			defer cancel()
			cl, err := g.client(ctx, cfg)
			if err != nil {
				return err
			}
			defer cl.Close()
			d := &appDescriber{ctx: ctx, adm: g.newAdmin(cl), cfg: cfg}
			res, err := d.describe()
			if err != nil {
				return err
			}
			if g.output == outputJSON {
				return g.render(cmd.OutOrStdout(), res, nil)
			}
			return writeAppDescribe(cmd.OutOrStdout(), res)
		},
	}
	c.Flags().StringVar(&stateDir, "state-dir", "", "the pipelines' state_dir, holding APP_ID/INSTANCE/ (default: state_dir of --config, else <temp dir>/eosflow)")
	_ = c.MarkFlagDirname("state-dir")
	return c
}

// appDescriber gathers one app's description.
type appDescriber struct {
	ctx context.Context
	adm *kadm.Client
	cfg config.Config
}

// describe reads the cluster, then the state directory.
func (d *appDescriber) describe() (appDescribeJSON, error) {
	app := d.cfg.AppID
	res := appDescribeJSON{App: app, InternalTopics: []internalTopicJSON{}, Stores: []storeStateJSON{}}
	groups, _ := d.adm.ListGroups(d.ctx) // only to tell apps apart; a principal may not list them
	topics, err := d.adm.ListTopics(d.ctx)
	if err != nil {
		return res, kafkaErr("list topics", err)
	}
	if res.InternalTopics, err = d.internalTopics(topics, groups.Groups()); err != nil {
		return res, err
	}
	if res.Group, err = d.group(res.InternalTopics); err != nil {
		return res, err
	}
	if len(res.InternalTopics) == 0 && len(res.Group.Members) == 0 && len(res.Group.Inputs) == 0 {
		return res, errNoSuchApp(app, groups.Groups())
	}
	c := d.cfg
	c.InstanceID = "" // runcfg.StateDir without an instance: <state_dir>/<app_id>
	res.StateDir = runcfg.StateDir(c)
	if res.Stores, err = d.stores(res.StateDir, res.InternalTopics); err != nil {
		return res, err
	}
	return res, nil
}

// internalTopicOf says whether topic is an internal topic of app, and of
// which kind and store or node. A topic of an app whose id extends app's
// ("orders-eu" for "orders") is not app's when that app has a group.
func internalTopicOf(app, topic string, groups []string) (kind, name string, ok bool) {
	if topic == topology.OffsetsTopic(app) {
		return kindOffsets, "", true // no other app's topic has this name
	}
	rest, found := strings.CutPrefix(topic, app+"-")
	if !found {
		return "", "", false
	}
	for _, k := range []string{kindChangelog, kindRepartition} {
		if n, found := strings.CutSuffix(rest, "-"+k); found && n != "" {
			kind, name = k, n
		}
	}
	if kind == "" {
		return "", "", false
	}
	for _, g := range groups {
		if g != app && strings.HasPrefix(g, app+"-") && strings.HasPrefix(topic, g+"-") {
			return "", "", false
		}
	}
	return kind, name, true
}

// internalTopics describes the app's changelogs, repartition topics and
// offsets mirror, sorted by name.
func (d *appDescriber) internalTopics(all kadm.TopicDetails, groups []string) ([]internalTopicJSON, error) {
	out := []internalTopicJSON{}
	var names []string
	for _, n := range all.Names() {
		kind, name, ok := internalTopicOf(d.cfg.AppID, n, groups)
		if !ok {
			continue
		}
		names = append(names, n)
		out = append(out, internalTopicJSON{Topic: n, Kind: kind, Name: name, Partitions: len(all[n].Partitions),
			ReplicationFactor: replicationFactor(all[n]), EndOffsets: []partitionEndJSON{}})
	}
	if len(names) == 0 {
		return out, nil
	}
	configs, err := topicSettings(d.ctx, d.adm, names, "cleanup.policy", "min.insync.replicas")
	if err != nil {
		return nil, err
	}
	ends, err := d.adm.ListEndOffsets(d.ctx, names...)
	if err != nil {
		return nil, kafkaErr("list end offsets of "+quoteAll(names), err)
	}
	for i := range out {
		t := &out[i]
		t.CleanupPolicy = configs[t.Topic]["cleanup.policy"]
		t.MinInsyncReplicas = configs[t.Topic]["min.insync.replicas"]
		for _, p := range all[t.Topic].Partitions.Sorted() {
			e := partitionEndJSON{Partition: p.Partition, Leader: p.Leader, EndOffset: -1}
			if o, ok := ends.Lookup(t.Topic, p.Partition); ok && o.Err == nil {
				e.EndOffset = o.Offset
			}
			t.EndOffsets = append(t.EndOffsets, e)
		}
		t.Problems = internalTopicProblems(*t)
	}
	return out, nil
}

// internalTopicProblems says what is wrong with an internal topic's
// settings: what the runtime or `eosctl doctor` would refuse or warn about.
func internalTopicProblems(t internalTopicJSON) []string {
	var ps []string
	compact := strings.Contains(t.CleanupPolicy, "compact")
	switch {
	case t.Kind == kindChangelog && !compact && t.CleanupPolicy != "":
		ps = append(ps, "not compacted: its state expires with its records")
	case t.Kind == kindRepartition && compact:
		ps = append(ps, "compacted: records of one key overwrite each other before they are read")
	case t.Kind == kindOffsets && !compact && t.CleanupPolicy != "":
		ps = append(ps, "not compacted: the offsets it mirrors expire with its records")
	}
	for _, e := range t.EndOffsets {
		if e.Leader < 0 {
			ps = append(ps, fmt.Sprintf("partition %d has no leader", e.Partition))
		}
	}
	return ps
}

// topicSettings reads the given configs of topics, whatever their source
// (a topic's own, a broker's or Kafka's default): name → key → value.
func topicSettings(ctx context.Context, adm *kadm.Client, topics []string, keys ...string) (map[string]map[string]string, error) {
	rcs, err := adm.DescribeTopicConfigs(ctx, topics...)
	if err != nil {
		return nil, kafkaErr("describe configs of topic(s) "+quoteAll(topics), err)
	}
	out := make(map[string]map[string]string, len(rcs))
	for _, rc := range rcs {
		if rc.Err != nil {
			return nil, kafkaErr(fmt.Sprintf("describe configs of topic %q", rc.Name), fmt.Errorf("%w%s", rc.Err, brokerMessage(rc.ErrMessage)))
		}
		m := map[string]string{}
		for _, c := range rc.Configs {
			if slices.Contains(keys, c.Key) && c.Value != nil {
				m[c.Key] = *c.Value
			}
		}
		out[rc.Name] = m
	}
	return out, nil
}

// group describes the app's consumer group and the lag of its inputs: the
// topics it committed offsets for, and its repartition topics.
func (d *appDescriber) group(internal []internalTopicJSON) (appGroupJSON, error) {
	app := d.cfg.AppID
	res := appGroupJSON{Group: app, State: "Dead", Members: []appMemberJSON{}, Inputs: []partitionLagJSON{}}
	described, err := d.adm.DescribeGroups(d.ctx, app)
	if err != nil && !errors.Is(err, kerr.GroupIDNotFound) {
		return res, kafkaErr("describe group "+app, err)
	}
	if dg, ok := described[app]; ok {
		switch {
		case errors.Is(dg.Err, kerr.GroupIDNotFound):
		case dg.Err != nil:
			return res, kafkaErr("describe group "+app, dg.Err)
		default:
			if dg.State != "" {
				res.State = dg.State
			}
			for _, m := range dg.Members {
				res.Members = append(res.Members, memberOf(m))
			}
		}
	}
	sort.Slice(res.Members, func(i, j int) bool {
		a, b := res.Members[i], res.Members[j]
		return a.InstanceID < b.InstanceID || a.InstanceID == b.InstanceID && a.MemberID < b.MemberID
	})
	committed, err := d.adm.FetchOffsets(d.ctx, app)
	if err != nil && !errors.Is(err, kerr.GroupIDNotFound) {
		return res, kafkaErr("fetch offsets of group "+app, err)
	}
	topics := committed.Partitions().Topics()
	for _, t := range internal {
		if t.Kind == kindRepartition && !slices.Contains(topics, t.Topic) {
			topics = append(topics, t.Topic)
		}
	}
	rows, err := groupLag(d.ctx, d.adm, d.cfg, committed, topics)
	if err != nil {
		return res, err
	}
	if rows != nil {
		res.Inputs = rows
	}
	res.TotalHWM, res.TotalLSO = lagTotals(rows)
	return res, nil
}

// memberOf is a group member with the partitions it was assigned.
func memberOf(m kadm.DescribedGroupMember) appMemberJSON {
	j := appMemberJSON{MemberID: m.MemberID, ClientID: m.ClientID, Host: m.ClientHost, Tasks: map[string][]int32{}}
	if m.InstanceID != nil {
		j.InstanceID = *m.InstanceID
	}
	if ca, ok := m.Assigned.AsConsumer(); ok {
		ts := kadm.TopicsSet{}
		for _, t := range ca.Topics {
			ts.Add(t.Topic, t.Partitions...)
		}
		j.Tasks = topicsJSON(ts)
	}
	return j
}

// errNoSuchApp says that the cluster knows nothing of app, and names the
// groups it does know, since an app's group id is its app_id.
func errNoSuchApp(app string, groups []string) error {
	msg := fmt.Sprintf("app %q has no consumer group, no committed offsets and no internal topics (%s-*-changelog, %s-*-repartition, %s) on this cluster — check the app_id",
		app, app, app, topology.OffsetsTopic(app))
	sort.Strings(groups)
	switch {
	case len(groups) == 0:
		msg += "; the cluster has no consumer groups at all, so no pipeline has run against it"
	case len(groups) > maxListedIDs:
		msg += fmt.Sprintf("; the cluster has %d consumer groups, e.g. %s (an app's group is its app_id)", len(groups), quoteAll(groups[:maxListedIDs]))
	default:
		msg += "; consumer groups on the cluster (an app's group is its app_id): " + quoteAll(groups)
	}
	return errors.New(msg)
}

// membersTable lists a group's members and the tasks each owns.
func membersTable(members []appMemberJSON) *table {
	t := newTable("INSTANCE", "CLIENT ID", "HOST", "TASKS", "MEMBER ID")
	for _, m := range members {
		ts := kadm.TopicsSet{}
		for topic, ps := range m.Tasks {
			ts.Add(topic, ps...)
		}
		t.add(orDash(m.InstanceID), m.ClientID, m.Host, partitionsString(ts), m.MemberID)
	}
	return t
}

// writeAppDescribe prints the description as titled tables.
func writeAppDescribe(w io.Writer, res appDescribeJSON) error {
	topics := newTable("TOPIC", "KIND", "PARTITIONS", "RF", "CLEANUP.POLICY", "MIN.ISR", "PROBLEMS")
	ends := newTable("TOPIC", "PARTITION", "LEADER", "END OFFSET", "COMMITTED", "LAG (LSO)")
	for _, t := range res.InternalTopics {
		topics.add(t.Topic, t.Kind, t.Partitions, t.ReplicationFactor, orDash(t.CleanupPolicy), orDash(t.MinInsyncReplicas), orDash(strings.Join(t.Problems, "; ")))
		for _, e := range t.EndOffsets {
			committed, lag := "-", "-"
			if t.Kind == kindRepartition {
				if i := slices.IndexFunc(res.Group.Inputs, func(r partitionLagJSON) bool { return r.Topic == t.Topic && r.Partition == e.Partition }); i >= 0 {
					committed, lag = offsetCell(res.Group.Inputs[i].Committed), offsetCell(res.Group.Inputs[i].LagLSO)
				}
			}
			ends.add(t.Topic, e.Partition, leaderCell(e.Leader), offsetCell(e.EndOffset), committed, lag)
		}
	}
	members := membersTable(res.Group.Members)
	stores := storesTable(res.Stores)
	grp := res.Group
	sections := []struct {
		title string
		t     *table
	}{
		{fmt.Sprintf("Internal topics of app %s:", res.App), topics},
		{"Internal topic partitions:", ends},
		{fmt.Sprintf("Group %s: %s, %d member(s)", grp.Group, grp.State, len(grp.Members)), members},
		{fmt.Sprintf("Inputs: lag %d to the last stable offset, %d to the high watermark", grp.TotalLSO, grp.TotalHWM), lagTable(grp.Inputs)},
		{fmt.Sprintf("State stores under %s:", res.StateDir), stores},
	}
	for i, s := range sections {
		if i > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintln(w, s.title)
		if err := s.t.write(w); err != nil {
			return err
		}
	}
	return nil
}
