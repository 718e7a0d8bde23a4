package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/topology"
)

// Finding statuses, from good to bad.
const (
	statusOK   = "ok"
	statusWarn = "warn"
	statusFail = "fail"
)

// finding is one result of `eosctl doctor`: what was checked, how it went,
// and, unless it is ok, what to do about it.
type finding struct {
	Check  string `json:"check"`
	Status string `json:"status"`
	Detail string `json:"detail"`
	Fix    string `json:"fix,omitempty"`
}

// doctorJSON is the -o json shape: OK is false when any check failed.
type doctorJSON struct {
	OK       bool      `json:"ok"`
	Findings []finding `json:"findings"`
}

// findings collects the results of the checks in order.
type findings []finding

func (fs *findings) ok(check, format string, a ...any) {
	*fs = append(*fs, finding{Check: check, Status: statusOK, Detail: fmt.Sprintf(format, a...)})
}

func (fs *findings) warn(check, detail, fix string) {
	*fs = append(*fs, finding{Check: check, Status: statusWarn, Detail: detail, Fix: fix})
}

func (fs *findings) fail(check, detail, fix string) {
	*fs = append(*fs, finding{Check: check, Status: statusFail, Detail: detail, Fix: fix})
}

// doctorOpts are the doctor's own flags: who runs the pipeline, which
// topics it reads and writes, and its state stores and repartitioning
// nodes (whose internal topics it makes, reads and writes), for the ACL
// checks.
type doctorOpts struct {
	acls         bool // print the needed ACLs as kafka-acls.sh commands and stop
	principal    string
	topics       []string
	inputTopics  []string
	outputTopics []string
	stores       []string // state stores: each has a changelog app_id-STORE-changelog
	repartitions []string // GroupBy and Through nodes: each has a topic app_id-NODE-repartition
}

// checkInternalNames refuses a --store or --repartition name that cannot
// be part of a topic name, so no kafka-acls.sh command is printed for a
// topic that cannot exist.
func (o doctorOpts) checkInternalNames(appID string) error {
	for _, names := range []struct {
		flag  string
		names []string
		topic func(app, name string) string
	}{
		{"--store", o.stores, topology.ChangelogTopic},
		{"--repartition", o.repartitions, topology.RepartitionTopic},
	} {
		for _, n := range names.names {
			if err := validTopicName(n); err != nil {
				return usageErrorf("%s %q: it becomes part of a topic name: %v", names.flag, n, err)
			}
			if appID == "" {
				continue
			}
			if err := validTopicName(names.topic(appID, n)); err != nil {
				return usageErrorf("%s %q: %v", names.flag, n, err)
			}
		}
	}
	return nil
}

// doctorEnv is what every check may use.
type doctorEnv struct {
	ctx       context.Context
	adm       *kadm.Client
	cl        *kgo.Client
	cfg       config.Config
	hasConfig bool // --config was given, so the pipeline settings are real
	brokers   kadm.BrokerDetails
	bcfgs     map[int32]map[string]string
	opts      doctorOpts
}

// newDoctorCmd checks whether a cluster can run exactly-once pipelines.
func newDoctorCmd(g *globals) *cobra.Command {
	var o doctorOpts
	c := &cobra.Command{
		Use:   "doctor",
		Short: "Check whether the cluster is ready for exactly-once pipelines",
		Long: `Check whether the cluster can run exactly-once pipelines, each finding ok,
warn or fail with the fix:

  - the APIs transactions need (InitProducerId, AddPartitionsToTxn, EndTxn,
    TxnOffsetCommit v3+ for KIP-447) and the admin APIs eosctl txn uses
  - the transaction.version feature (KIP-890 transactions v2)
  - the __transaction_state log: replication factor and min ISR against the
    number of brokers
  - the pipeline config (--config, else the defaults and EOS_* variables)
    against the brokers: transaction_timeout > commit_interval and <=
    transaction.max.timeout.ms, session_timeout within the group limits
  - transactional ids of the app in the old app_id-instance_id form, which
    earlier versions used (this one uses app_id:instance_id)
  - the app's internal topics: each changelog (app_id-STORE-changelog) must
    be compacted and each repartition topic (app_id-NODE-repartition) must
    not be, and the offsets mirror of an exactly-once app
    (app_id-eos-offsets) should be compacted; every partition needs a
    leader and enough in-sync replicas for acks=all, min.insync.replicas
    must not exceed the replicas; a changelog whose partition count matches
    no known input (--input-topic, --topic, the topics the group committed)
    is flagged
  - with an authorizer, the ACLs the pipeline's principal needs:
    IdempotentWrite on the cluster, Write and Describe on its transactional
    ids (the prefix app_id:), Read on its group, Read on input and Write on
    output topics; for each --store, Create, Read and Write on its
    changelog app_id-STORE-changelog (the runtime makes it on first start,
    writes it in every transaction and restores from it); for each
    --repartition node (GroupBy, Through), Create, Read, Write and Delete
    on app_id-NODE-repartition (made on first start, written and read back
    by the app, its consumed records deleted with DeleteRecords); under
    exactly-once, Create, Read and Write on the offsets mirror
    app_id-eos-offsets (made on first start, written in every transaction,
    read when the app takes partitions over)

Exits 1 when any check fails.

With --acls it checks nothing and does not connect: it prints the ACLs the
pipeline needs (least privilege) as kafka-acls.sh commands for --principal,
ready to run (-o json lists them as objects). doctor cannot see the
pipeline's code: name every state store with --store and every GroupBy or
Through node with --repartition (as 'eosctl app describe' or the
topology's Describe lists them), or their grants are left out.`,
		Example: `  eosctl doctor --config pipeline.yaml --principal User:orders-app --input-topic orders --output-topic invoices
  eosctl doctor --acls --config pipeline.yaml --input-topic orders --output-topic invoices | sh
  eosctl doctor --acls --config pipeline.yaml --input-topic orders --output-topic counts --store counts --repartition by-customer`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := g.pipelineConfig()
			if err != nil {
				return err
			}
			if err := o.checkInternalNames(cfg.AppID); err != nil {
				return err
			}
			if o.acls {
				principal := o.principal
				if principal == "" && cfg.SASL.Username != "" {
					principal = "User:" + cfg.SASL.Username
				}
				grants, err := (&doctorEnv{cfg: cfg, opts: o}).grants(principal)
				if err != nil {
					return err
				}
				if g.output == outputJSON {
					return g.render(cmd.OutOrStdout(), grants, nil)
				}
				return writeGrants(cmd.OutOrStdout(), grants)
			}
			ctx, cancel := g.commandContext(cmd)
			defer cancel()
			cl, err := g.client(ctx, cfg)
			if err != nil {
				return err
			}
			defer cl.Close()
			env := &doctorEnv{ctx: ctx, cl: cl, adm: g.newAdmin(cl), cfg: cfg, hasConfig: g.configFile != "", opts: o}
			if env.opts.principal == "" && cfg.SASL.Username != "" {
				env.opts.principal = "User:" + cfg.SASL.Username
			}
			fs, err := env.run()
			if err != nil {
				return err
			}
			res := doctorJSON{OK: true, Findings: fs}
			t := newTable("STATUS", "CHECK", "DETAIL", "FIX")
			for _, f := range fs {
				if f.Status == statusFail {
					res.OK = false
				}
				t.add(f.Status, f.Check, f.Detail, orDash(f.Fix))
			}
			if err := g.render(cmd.OutOrStdout(), res, t); err != nil {
				return err
			}
			if !res.OK {
				return errFindings
			}
			return nil
		},
	}
	f := c.Flags()
	f.BoolVar(&o.acls, "acls", false, "print the ACLs the pipeline needs as kafka-acls.sh commands, without connecting")
	f.StringVar(&o.principal, "principal", "", "principal the pipeline runs as, e.g. User:orders-app (default User:<sasl user>)")
	f.StringSliceVar(&o.inputTopics, "input-topic", nil, "topic the pipeline reads (repeatable): checks Read")
	f.StringSliceVar(&o.outputTopics, "output-topic", nil, "topic the pipeline writes (repeatable): checks Write")
	f.StringSliceVar(&o.topics, "topic", nil, "topic the pipeline both reads and writes (repeatable)")
	f.StringSliceVar(&o.stores, "store", nil, "state store of the pipeline (repeatable): checks Create, Read and Write on its changelog app_id-STORE-changelog")
	f.StringSliceVar(&o.repartitions, "repartition", nil, "GroupBy or Through node of the pipeline (repeatable): checks Create, Read, Write and Delete on app_id-NODE-repartition")
	return c
}

// run gathers the cluster facts once and runs every check.
func (e *doctorEnv) run() (findings, error) {
	var err error
	if e.brokers, err = e.adm.ListBrokers(e.ctx); err != nil {
		return nil, kafkaErr("list brokers", err)
	}
	var fs findings
	if e.bcfgs, err = brokerConfigs(e.ctx, e.adm); err != nil {
		// A pipeline principal usually may not read broker configs; the
		// other checks still help, with Kafka's defaults standing in.
		fs.warn("broker configs", fmt.Sprintf("cannot read them (%v), so the checks below assume Kafka's defaults", err),
			"run doctor as a principal with DescribeConfigs on the cluster")
	}
	if err := e.checkAPIs(&fs); err != nil {
		return nil, err
	}
	e.checkTxnLog(&fs)
	e.checkPipeline(&fs)
	e.checkLegacyTxnIDs(&fs)
	e.checkInternalTopics(&fs)
	if err := e.checkACLs(&fs); err != nil {
		return nil, err
	}
	return fs, nil
}

// brokerConfig returns key's values across brokers that report it.
func (e *doctorEnv) brokerConfig(key string) []string {
	var vs []string
	for _, id := range e.brokers.NodeIDs() {
		if v, ok := e.bcfgs[id][key]; ok {
			vs = append(vs, v)
		}
	}
	return vs
}
