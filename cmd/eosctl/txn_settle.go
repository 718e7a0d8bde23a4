package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/eosflow/eosflow/internal/txnrepair"
	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
)

// settleJSON reports what txn abort or txn commit did.
type settleJSON struct {
	Topic            string `json:"topic"`
	Partition        int32  `json:"partition"`
	StartOffset      int64  `json:"start_offset"`
	ProducerID       int64  `json:"producer_id"`
	ProducerEpoch    int16  `json:"producer_epoch"`    // of the transaction
	MarkerEpoch      int16  `json:"marker_epoch"`      // the marker was written with
	CoordinatorEpoch int32  `json:"coordinator_epoch"` // the marker was written with
	Marker           string `json:"marker"`            // COMMIT or ABORT
	Outcome          string `json:"outcome"`           // what the evidence proved
	Evidence         string `json:"evidence,omitempty"`
	Forced           bool   `json:"forced"`
	Aborted          bool   `json:"aborted"`
	Committed        bool   `json:"committed"`
	LastStableOffset int64  `json:"last_stable_offset"`
}

// settleFlags are txn abort's and txn commit's flags.
type settleFlags struct {
	topic       string
	partition   int32
	startOffset int64
	yes, force  bool
}

// bind declares the flags on c; force only where the command takes it.
func (s *settleFlags) bind(c *cobra.Command, force bool) {
	f := c.Flags()
	f.StringVar(&s.topic, "topic", "", "topic of the hanging transaction (required)")
	f.Int32Var(&s.partition, "partition", -1, "partition of the hanging transaction (required)")
	f.Int64Var(&s.startOffset, "start-offset", -1, "first offset of the hanging transaction, as 'txn hanging' prints it (required)")
	f.BoolVarP(&s.yes, "yes", "y", false, "do not ask for confirmation")
	if force {
		f.BoolVar(&s.force, "force", false, "abort even when no evidence proves the transaction aborted, or when it proves it committed")
	}
	for _, n := range []string{"topic", "partition", "start-offset"} {
		_ = c.MarkFlagRequired(n)
	}
}

// settle writes the marker of commit (COMMIT, or ABORT) for the open
// transaction that s names, once the evidence (see judge) proves that
// outcome, or, for an ABORT, with --force. It prints the evidence and
// what it will do, and asks unless --yes.
func (g *globals) settle(cmd *cobra.Command, s settleFlags, commit bool) error {
	if s.partition < 0 || s.startOffset < 0 {
		return usageErrorf("--partition and --start-offset must not be negative")
	}
	return g.withOutcomes(cmd, func(ctx context.Context, adm *kadm.Client, f *txnrepair.Finder) error {
		_, producers, err := producersOf(ctx, adm, s.topic, s.partition)
		if err != nil {
			return err
		}
		var h *kadm.DescribedProducer
		for i := range producers {
			if producers[i].CurrentTxnStartOffset == s.startOffset {
				h = &producers[i]
			}
		}
		if h == nil {
			return fmt.Errorf("no open transaction starts at offset %d on %s-%d — list open ones with 'eosctl txn producers --topic %s --partition %d'",
				s.startOffset, s.topic, s.partition, s.topic, s.partition)
		}
		hg, hangs, v, err := judgeOne(ctx, adm, f, *h)
		if err != nil {
			return err
		}
		res := settleJSON{Topic: s.topic, Partition: s.partition, StartOffset: s.startOffset,
			ProducerID: h.ProducerID, ProducerEpoch: h.ProducerEpoch, CoordinatorEpoch: max(h.CoordinatorEpoch, 0),
			Marker: "ABORT", Outcome: v.Outcome.String(), Evidence: v.Where, LastStableOffset: -1}
		if commit {
			res.Marker = "COMMIT"
		}
		res.MarkerEpoch = h.ProducerEpoch
		if v.Proven() {
			res.MarkerEpoch = f.RepairEpoch(ctx, *h, hg.Current)
		}
		errw := cmd.ErrOrStderr()
		if !hangs {
			fmt.Fprintf(errw, "warning: it may not hang: %s; ending it here can make its producer's commit fail — prefer waiting for its transaction timeout\n", hg.Reason)
		}
		if err := refuseUnproven(errw, s, v, commit); err != nil {
			return err
		}
		res.Forced = !commit && v.Outcome != txnrepair.Aborted
		fmt.Fprintf(errw, "will write %s marker to %s-%d for producer id %d epoch %d (coordinator epoch %d), the transaction starting at offset %d\n",
			map[bool]string{true: "a COMMIT", false: "an ABORT"}[commit], s.topic, s.partition, res.ProducerID, res.MarkerEpoch, res.CoordinatorEpoch, s.startOffset)
		if !s.yes && !confirm(cmd.InOrStdin(), errw) {
			return &exitError{code: exitFailure, err: errors.New("not confirmed; nothing was written (pass --yes to skip the question)")}
		}
		if err := txnrepair.WriteMarker(ctx, adm, *h, commit, res.MarkerEpoch); err != nil {
			return kafkaErr(fmt.Sprintf("write %s marker to %s-%d", res.Marker, s.topic, s.partition), err)
		}
		res.Committed, res.Aborted = commit, !commit
		if lso, err := adm.ListCommittedOffsets(ctx, s.topic); err == nil {
			if o, ok := lso.Lookup(s.topic, s.partition); ok && o.Err == nil {
				res.LastStableOffset = o.Offset
			}
		}
		t := newTable("TOPIC", "PARTITION", "START OFFSET", "PRODUCER ID", "EPOCH", "MARKER", "OUTCOME", "LAST STABLE OFFSET")
		t.add(s.topic, s.partition, s.startOffset, res.ProducerID, res.MarkerEpoch, res.Marker, res.Outcome, res.LastStableOffset)
		return g.render(cmd.OutOrStdout(), res, t)
	})
}

// refuseUnproven stops a marker that the evidence does not back: a COMMIT
// always needs proof of a commit; an ABORT needs proof of an abort, or
// --force, and --force over a proven commit is said out loud.
func refuseUnproven(w io.Writer, s settleFlags, v txnrepair.Verdict, commit bool) error {
	at := fmt.Sprintf("--topic %s --partition %d --start-offset %d", s.topic, s.partition, s.startOffset)
	switch {
	case commit && v.Outcome == txnrepair.Committed, !commit && v.Outcome == txnrepair.Aborted:
		fmt.Fprintf(w, "the transaction %s (%s)\n", v.Outcome, v.Where)
		return nil
	case commit && v.Outcome == txnrepair.Aborted:
		return fmt.Errorf("refusing to commit: the transaction aborted (%s); committing it would expose records that were never committed — end it with 'eosctl txn abort %s'", v.Where, at)
	case commit:
		return fmt.Errorf("refusing to commit: no evidence proves the transaction committed (neither its coordinator, its log nor a marker on its other partitions%s); committing it could expose records that were never committed", unsureNote(v))
	case v.Outcome == txnrepair.Committed && !s.force:
		return fmt.Errorf("refusing to abort: the transaction committed (%s); aborting it would drop its records here while the rest of it stays visible — complete it with 'eosctl txn commit %s' (--force aborts it anyway)", v.Where, at)
	case !s.force:
		return fmt.Errorf("refusing to abort: no evidence proves the transaction aborted (neither its coordinator, its log nor a marker on its other partitions%s); if it committed, aborting drops its records here while the rest of it stays visible — find out from the producer's application, then pass --force to abort anyway", unsureNote(v))
	}
	fmt.Fprintf(w, "warning: --force: aborting a transaction that the evidence shows %s; if it committed, its records on this partition are lost while the rest of it stays visible\n", v.Outcome)
	return nil
}

// unsureNote says that a read failed, where one did.
func unsureNote(v txnrepair.Verdict) string {
	if v.Unsure {
		return "; a read failed, so trying again may tell"
	}
	return ""
}

// confirm asks on w and reads one line from r; only y or yes proceeds, so
// an empty or closed stdin never writes anything.
func confirm(r io.Reader, w io.Writer) bool {
	fmt.Fprint(w, "proceed? [y/N] ")
	line, _ := bufio.NewReader(r).ReadString('\n')
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return true
	}
	fmt.Fprintln(w)
	return false
}
