package main

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Isolation levels of `consume --isolation`, spelt as Kafka's
// isolation.level.
const (
	readCommitted   = "read_committed"
	readUncommitted = "read_uncommitted"
)

// consumeOpts are the flags of `eosctl consume`.
type consumeOpts struct {
	from       string
	partitions []int32
	isolation  string
	follow     bool
	max        int64
	idle       time.Duration
	format     string
	keySep     string
}

// newConsumeCmd prints a topic's records, read_committed by default, to
// see what an exactly-once pipeline really wrote.
func newConsumeCmd(g *globals) *cobra.Command {
	o := &consumeOpts{}
	c := &cobra.Command{
		Use:   "consume TOPIC [--from beginning|end|OFFSET|-N|TIME] [-p N...] [--follow] [--max N] [--idle D] [-f LAYOUT | -o json]",
		Short: "Print a topic's records (like kcat -C), read_committed by default",
		Long: `Print the records of TOPIC, without joining a consumer group (nothing is
committed). By default it reads every partition from the beginning and stops
at the end offsets as they were when it started; --follow keeps waiting for
new records until --max, --idle or an interrupt. A summary line goes to
stderr.

--isolation read_committed (the default) shows only committed records and
stops at the last stable offset; read_uncommitted also shows the records of
aborted and open transactions.

--from: beginning, end, an OFFSET (in each partition read), -N (the last N
records of each partition) or an RFC 3339 time (the first record at or
after it).

Output: the value, one per line; with -K SEP the key, SEP and the value;
with -o json one object per line with topic, partition, offset, timestamp,
producer_id, producer_epoch, key, value and headers (bytes that are not
UTF-8 go to key_base64 / value_base64 instead); with -f a layout, as kcat's -f:
  %t topic   %p partition   %o offset   %k key   %v value
  %d timestamp (epoch ms; %d{go#RFC3339#} for a date)
  %h{%k=%v;} each header    %H header count   %K %V key and value length
  %x producer id   %y producer epoch   %e leader epoch   %i record number
  \n newline   \t tab   \\ backslash   %% percent   %v{base64} %v{hex}`,
		Example: `  eosctl consume orders
  eosctl consume orders -f '%p/%o %k\t%v\n' --max 10
  eosctl consume invoices -o json --isolation read_uncommitted
  eosctl consume orders --from end --follow -K :`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.run(cmd, g, args[0])
		},
	}
	f := c.Flags()
	f.StringVar(&o.from, "from", "beginning", "where to start: beginning, end, an offset, -N (N before the end) or an RFC 3339 time")
	f.Int32SliceVarP(&o.partitions, "partition", "p", nil, "read only these partitions (repeatable or comma separated; default all)")
	f.StringVar(&o.isolation, "isolation", readCommitted, "read_committed or read_uncommitted (to see aborted and open transactions)")
	f.BoolVar(&o.follow, "follow", false, "keep waiting for new records instead of stopping at the end offsets")
	f.Int64Var(&o.max, "max", 0, "stop after this many records (0: no limit)")
	f.DurationVar(&o.idle, "idle", 0, "stop after this long without a record (0: no limit)"+durationFlagHelp)
	f.StringVarP(&o.format, "format", "f", "", "print each record with this layout, e.g. '%k\\t%v\\n' (verbs in --help)")
	f.StringVarP(&o.keySep, "key-separator", "K", "", "print the key and SEP before the value")
	_ = c.RegisterFlagCompletionFunc("isolation", cobra.FixedCompletions(
		[]string{readCommitted, readUncommitted}, cobra.ShellCompDirectiveNoFileComp))
	_ = c.RegisterFlagCompletionFunc("from", cobra.FixedCompletions(
		[]string{"beginning", "end"}, cobra.ShellCompDirectiveNoFileComp))
	return c
}

// check validates the flags before anything connects.
func (o *consumeOpts) check(g *globals) (fromSpec, error) {
	switch {
	case o.isolation != readCommitted && o.isolation != readUncommitted:
		return fromSpec{}, usageErrorf("--isolation must be %q or %q, got %q", readCommitted, readUncommitted, o.isolation)
	case o.max < 0:
		return fromSpec{}, usageErrorf("--max must be 0 (no limit) or more, got %d", o.max)
	case o.idle < 0:
		return fromSpec{}, usageErrorf("--idle must be 0 (no limit) or more, got %s", o.idle)
	case g.output == outputJSON && (o.format != "" || o.keySep != ""):
		return fromSpec{}, usageErrorf("-o json prints every field; drop --format and --key-separator")
	case o.format != "" && o.keySep != "":
		return fromSpec{}, usageErrorf("--format prints the key where the layout says (%%k); drop --key-separator")
	}
	for _, p := range o.partitions {
		if p < 0 {
			return fromSpec{}, usageErrorf("--partition must be 0 or more, got %d", p)
		}
	}
	return parseFrom(o.from)
}

// run checks the flags and the topic, plans where each partition starts
// and ends, then reads.
func (o *consumeOpts) run(cmd *cobra.Command, g *globals, topic string) error {
	if err := validTopicName(topic); err != nil {
		return err
	}
	from, err := o.check(g)
	if err != nil {
		return err
	}
	out, err := newRecordWriter(cmd.OutOrStdout(), g.output == outputJSON, textLayout(o.format, o.keySep))
	if err != nil {
		return err
	}
	var ranges map[int32]partRange
	err = g.withTopic(cmd, topic, func(ctx context.Context, adm *kadm.Client, parts []int32) error {
		if len(o.partitions) > 0 {
			if err := checkPartitions(topic, parts, o.partitions); err != nil {
				return err
			}
			parts = slices.Compact(slices.Sorted(slices.Values(o.partitions)))
		}
		ranges, err = planRanges(ctx, adm, topic, parts, from, o.isolation == readCommitted)
		return err
	})
	if err != nil {
		return err
	}
	rd := newReader(topic, ranges, o, out, cmd.ErrOrStderr())
	start := time.Now()
	why := "reached the end offsets"
	if !rd.done() {
		if why, err = o.read(cmd, g, rd); err != nil {
			return err
		}
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "consumed %d record(s) from %s in %s: %s\n", rd.read, topic, fmtAge(time.Since(start)), why)
	return nil
}

// read connects the client that fetches and runs rd until it stops.
func (o *consumeOpts) read(cmd *cobra.Command, g *globals, rd *reader) (string, error) {
	iso := kgo.ReadCommitted()
	if o.isolation == readUncommitted {
		iso = kgo.ReadUncommitted()
	}
	cl, err := g.recordClient(
		kgo.ConsumePartitions(rd.offsets()),
		kgo.FetchIsolationLevel(iso),
		kgo.KeepControlRecords(), // see reader.take
	)
	if err != nil {
		return "", err
	}
	defer cl.Close()
	rd.cl = cl
	ctx, stop := untilSignal(cmd)
	defer stop()
	return rd.run(ctx)
}
