package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// produceOpts are the flags of `eosctl produce`.
type produceOpts struct {
	file      string
	keySep    string
	headers   []string
	partition int32
	rate      float64
	format    string
}

// producedJSON is the -o json summary of `produce`.
type producedJSON struct {
	Topic      string  `json:"topic"`
	Records    int64   `json:"records"`
	Partitions []int32 `json:"partitions"`
	TookMs     int64   `json:"took_ms"`
}

// newProduceCmd writes input lines to a topic as records, so a pipeline
// can be fed by hand or from a file without kcat or Kafka's scripts.
func newProduceCmd(g *globals) *cobra.Command {
	o := &produceOpts{}
	c := &cobra.Command{
		Use:   "produce TOPIC [--file F] [-K SEP] [-H KEY=VALUE...] [-p N] [--rate R] [--format text|json]",
		Short: "Write records to a topic, one per input line (like kcat -P)",
		Long: `Write one record per line of stdin (or --file) to TOPIC, then print a
summary line to stderr (with -o json, also a JSON summary to stdout).

--format text (the default): the line is the value; with -K SEP the line is
split at the first SEP into key and value, and a line without SEP has no
key. An empty line is an empty value.

--format json: one object per line, with any of
  key, value     text; other JSON (an object, a number) is sent as its compact
                 JSON; null or absent is a null key or value
  key_base64, value_base64   bytes that are not text
  headers        {"k":"v",...} or [{"key":"k","value":"v"},...] (keys may repeat)
  timestamp      RFC 3339 ("2024-05-01T12:00:00Z") or epoch milliseconds
Blank lines are skipped. The lines 'eosctl consume -o json' prints are valid
input: their topic, partition, offset and producer fields are ignored.

Records go to --partition, or else by the client's default partitioner
(murmur2 of the key, as the Java client; keyless records spread in
batches). --header adds headers to every record, before a JSON line's own.

A bad line stops the command, exits 1 and names the line; the lines before
it have been produced. The topic must exist: it is never auto-created.`,
		Example: `  eosctl produce orders --key-separator : < orders.txt
  echo 'o-1:{"amount":3}' | eosctl produce orders -K : -H source=manual
  eosctl produce orders --format json --file orders.jsonl --rate 100
  eosctl produce orders --partition 0 --brokers kafka:9093 --tls-ca ca.pem < lines.txt`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.run(cmd, g, args[0])
		},
	}
	f := c.Flags()
	f.StringVar(&o.file, "file", "", "read records from this file instead of stdin")
	f.StringVarP(&o.keySep, "key-separator", "K", "", "split each text line at the first SEP into key and value")
	f.StringArrayVarP(&o.headers, "header", "H", nil, "header KEY=VALUE added to every record (repeatable)")
	f.Int32VarP(&o.partition, "partition", "p", -1, "partition to write every record to (-1: the client's partitioner)")
	f.Float64Var(&o.rate, "rate", 0, "records per second at most (0: unlimited)")
	f.StringVar(&o.format, "format", inputText, "input format: text or json (one object per line)")
	_ = c.RegisterFlagCompletionFunc("format", cobra.FixedCompletions(
		[]string{inputText, inputJSON}, cobra.ShellCompDirectiveNoFileComp))
	_ = c.MarkFlagFilename("file")
	return c
}

// check validates the flags before anything connects and returns the
// --header headers.
func (o *produceOpts) check() ([]kgo.RecordHeader, error) {
	if o.format != inputText && o.format != inputJSON {
		return nil, usageErrorf("--format must be %q or %q, got %q", inputText, inputJSON, o.format)
	}
	if o.format == inputJSON && o.keySep != "" {
		return nil, usageErrorf("--key-separator splits text lines; with --format json give each line's \"key\"")
	}
	if o.partition < -1 {
		return nil, usageErrorf("--partition must be 0 or more, got %d", o.partition)
	}
	if math.IsNaN(o.rate) || math.IsInf(o.rate, 0) || o.rate < 0 || (o.rate > 0 && o.rate < 0.001) {
		return nil, usageErrorf("--rate must be 0 (unlimited) or at least 0.001 records per second, got %v", o.rate)
	}
	hs := make([]kgo.RecordHeader, 0, len(o.headers))
	for _, h := range o.headers {
		k, v, ok := strings.Cut(h, "=")
		if !ok || k == "" {
			return nil, usageErrorf("--header %q: want KEY=VALUE", h)
		}
		hs = append(hs, kgo.RecordHeader{Key: k, Value: []byte(v)})
	}
	return hs, nil
}

// input opens --file, or stdin without it.
func (o *produceOpts) input(cmd *cobra.Command) (io.Reader, func(), error) {
	if o.file == "" {
		return cmd.InOrStdin(), func() {}, nil
	}
	f, err := os.Open(o.file)
	if err != nil {
		return nil, nil, fmt.Errorf("cannot read --file: %w", err)
	}
	return f, func() { f.Close() }, nil
}

// run checks the flags, the input and the topic, then produces every line.
func (o *produceOpts) run(cmd *cobra.Command, g *globals, topic string) error {
	if err := validTopicName(topic); err != nil {
		return err
	}
	headers, err := o.check()
	if err != nil {
		return err
	}
	in, closeIn, err := o.input(cmd)
	if err != nil {
		return err
	}
	defer closeIn()
	err = g.withTopic(cmd, topic, func(_ context.Context, _ *kadm.Client, parts []int32) error {
		if o.partition < 0 {
			return nil
		}
		return checkPartitions(topic, parts, []int32{o.partition})
	})
	if err != nil {
		return err
	}
	var opts []kgo.Opt
	if o.partition >= 0 {
		opts = append(opts, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	}
	cl, err := g.recordClient(opts...)
	if err != nil {
		return err
	}
	defer cl.Close()
	return o.produce(cmd, g, cl, topic, in, headers)
}

// produce sends every input line and reports: the summary, or the first
// failure with how many records were written before it.
func (o *produceOpts) produce(cmd *cobra.Command, g *globals, cl *kgo.Client, topic string, in io.Reader, headers []kgo.RecordHeader) error {
	ctx, stop := untilSignal(cmd)
	s := newSender(cl, topic, g.timeout)
	start := time.Now()
	inputErr := o.feed(ctx, in, s, headers)
	stop() // a second interrupt while flushing ends eosctl at once
	fctx, cancel := context.WithTimeout(context.Background(), 2*g.timeout)
	defer cancel()
	flushErr := cl.Flush(fctx)
	written, parts := s.result()
	if inputErr == nil {
		inputErr = s.failed()
	}
	if inputErr != nil {
		return fmt.Errorf("%w; %d record(s) were produced", inputErr, written)
	}
	if flushErr != nil {
		return fmt.Errorf("the brokers did not acknowledge every record within %s; %d record(s) were produced", 2*g.timeout, written)
	}
	took := time.Since(start)
	fmt.Fprintf(cmd.ErrOrStderr(), "produced %d record(s) to %s partition(s) %s in %s\n", written, topic, int32sCell(parts), fmtAge(took))
	if g.output == outputJSON {
		return g.render(cmd.OutOrStdout(), producedJSON{Topic: topic, Records: written, Partitions: orEmpty(parts), TookMs: took.Milliseconds()}, nil)
	}
	return nil
}

// feed turns input lines into records and sends them until the input
// ends, a line is bad, a send fails or ctx ends (an interrupt: then what
// was read is still flushed).
func (o *produceOpts) feed(ctx context.Context, in io.Reader, s *sender, headers []kgo.RecordHeader) error {
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	lines := readLines(rctx, in)
	p := newPacer(o.rate)
	for {
		var l inputLine
		var ok bool
		select {
		case l, ok = <-lines:
		case <-ctx.Done():
			return nil
		}
		switch {
		case !ok:
			return nil
		case l.err != nil:
			return l.err
		}
		if err := s.failed(); err != nil {
			return err
		}
		r, err := o.record(l.text)
		if err != nil {
			return fmt.Errorf("line %d: %w", l.n, err)
		}
		if r == nil {
			continue
		}
		r.Headers = append(slices.Clone(headers), r.Headers...)
		r.Partition = max(o.partition, 0) // read by the manual partitioner only
		if p.wait(ctx) != nil {
			return nil
		}
		// Not cancelled by an interrupt: what was read is still sent.
		s.send(context.WithoutCancel(ctx), l.n, r)
	}
}

// record parses one line in --format; nil for a blank JSON line.
func (o *produceOpts) record(line []byte) (*kgo.Record, error) {
	if o.format == inputText {
		return textRecord(line, o.keySep), nil
	}
	if len(bytes.TrimSpace(line)) == 0 {
		return nil, nil
	}
	return jsonRecord(line)
}
