package main

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/eosflow/eosflow/config"
)

// partitionLagJSON is one partition of `group lag`. LagLSO is the lag
// (see lagHelp); LagHWM the raw distance to the high watermark.
type partitionLagJSON struct {
	Topic            string `json:"topic"`
	Partition        int32  `json:"partition"`
	Committed        int64  `json:"committed"`
	HighWatermark    int64  `json:"high_watermark"`
	LastStableOffset int64  `json:"last_stable_offset"`
	LagHWM           int64  `json:"lag_hwm"`
	LagLSO           int64  `json:"lag_lso"`
	OpenTransaction  bool   `json:"open_transaction"`
}

// groupLagJSON is the -o json shape of `group lag`.
type groupLagJSON struct {
	Group      string             `json:"group"`
	TotalHWM   int64              `json:"total_lag_hwm"`
	TotalLSO   int64              `json:"total_lag_lso"`
	Partitions []partitionLagJSON `json:"partitions"`
}

// newGroupLagCmd shows lag against both the high watermark and the last
// stable offset.
func newGroupLagCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "lag GROUP",
		Short: "Show a group's lag to the last stable offset and to the high watermark",
		Long: `Show, per partition the group committed, the committed offset, the high
watermark (HWM), the last stable offset (LSO, what read_committed consumers
can reach), and the lag to each.

` + lagHelp + `

An LSO behind the HWM means a transaction is open on that partition; if it
stays there, look for a hanging transaction with 'eosctl txn hanging --topic T'.`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			group := args[0]
			cfg, err := g.pipelineConfig()
			if err != nil {
				return err
			}
			ctx, cancel := g.commandContext(cmd)
			defer cancel()
			cl, err := g.client(ctx, cfg)
			if err != nil {
				return err
			}
			defer cl.Close()
			adm := g.newAdmin(cl)
			committed, err := adm.FetchOffsets(ctx, group)
			if err != nil && !errors.Is(err, kerr.GroupIDNotFound) {
				return kafkaErr("fetch offsets of group "+group, err)
			}
			if len(committed) == 0 {
				return fmt.Errorf("group %q has no committed offsets — check the group name (the pipeline's app_id)", group)
			}
			rows, err := groupLag(ctx, adm, cfg, committed, committed.Partitions().Topics())
			if err != nil {
				return err
			}
			res := groupLagJSON{Group: group, Partitions: rows}
			res.TotalHWM, res.TotalLSO = lagTotals(rows)
			return g.render(cmd.OutOrStdout(), res, lagTable(rows))
		},
	}
}

// lagHelp says what the lag of `group lag` and `app describe` measures.
var lagHelp = fmt.Sprintf(`Lag is to the LSO: the offsets from the committed offset up to the LSO,
records, aborted records and transaction markers alike; 0 when caught up,
that is when none of them is a record a read_committed consumer would get
(read to check when there are at most %d). A consumer commits the offset
after its last record, so on a topic written in transactions a caught-up one
trails the LSO by the commit marker after that record, and still has lag 0.
Lag to the HWM is the raw distance: it also counts the records of open
transactions, so it stays above 0 while an exactly-once pipeline is caught up.`, maxProbedLag)

// groupLag reads the HWM and LSO of every partition of topics and joins
// them with a group's committed offsets: `group lag` asks for the topics the
// group committed, `app describe` also for its repartition topics, which
// may have no commit yet. Lags of only markers are then read and zeroed
// (skipMarkers), with a client of cfg's.
func groupLag(ctx context.Context, adm *kadm.Client, cfg config.Config, committed kadm.OffsetResponses, topics []string) ([]partitionLagJSON, error) {
	if len(topics) == 0 {
		return nil, nil
	}
	hwm, err := adm.ListEndOffsets(ctx, topics...)
	if err != nil {
		return nil, kafkaErr("list end offsets", err)
	}
	// ListCommittedOffsets lists read_committed: the last stable offsets.
	lso, err := adm.ListCommittedOffsets(ctx, topics...)
	if err != nil {
		return nil, kafkaErr("list last stable offsets", err)
	}
	rows := lagRows(committed, hwm, lso)
	skipMarkers(ctx, cfg, rows)
	return rows, nil
}

// lagTotals sums the known lags of rows, to HWM and to LSO.
func lagTotals(rows []partitionLagJSON) (hwm, lso int64) {
	for _, r := range rows {
		hwm += max(r.LagHWM, 0)
		lso += max(r.LagLSO, 0)
	}
	return hwm, lso
}

// lagTable is the table of lag rows, flagging partitions whose LSO is
// held back by a transaction.
func lagTable(rows []partitionLagJSON) *table {
	t := newTable("TOPIC", "PARTITION", "COMMITTED", "LSO", "HWM", "LAG (LSO)", "LAG (HWM)", "NOTE")
	for _, r := range rows {
		var notes []string
		if skipped := r.LastStableOffset - max(r.Committed, 0); r.LagLSO == 0 && skipped > 0 {
			notes = append(notes, fmt.Sprintf("caught up: %d transaction marker(s) or aborted record(s) after the commit", skipped))
		}
		if r.OpenTransaction {
			notes = append(notes, fmt.Sprintf("LSO %d behind HWM: open or hanging transaction", r.HighWatermark-r.LastStableOffset))
		}
		note := strings.Join(notes, "; ")
		t.add(r.Topic, r.Partition, offsetCell(r.Committed), offsetCell(r.LastStableOffset), offsetCell(r.HighWatermark),
			offsetCell(r.LagLSO), offsetCell(r.LagHWM), note)
	}
	return t
}

// lagRows joins committed offsets with the HWM and LSO of every partition
// listed, lags counted in offsets; a partition without a commit has
// committed -1 and its lag is the whole log (-1 when the offsets are
// unknown).
func lagRows(committed kadm.OffsetResponses, hwm, lso kadm.ListedOffsets) []partitionLagJSON {
	var rows []partitionLagJSON
	hwm.Each(func(h kadm.ListedOffset) {
		r := partitionLagJSON{Topic: h.Topic, Partition: h.Partition, Committed: -1, HighWatermark: -1, LastStableOffset: -1, LagHWM: -1, LagLSO: -1}
		if h.Err == nil {
			r.HighWatermark = h.Offset
		}
		if l, ok := lso.Lookup(h.Topic, h.Partition); ok && l.Err == nil {
			r.LastStableOffset = l.Offset
		}
		if c, ok := committed.Lookup(h.Topic, h.Partition); ok && c.Err == nil {
			r.Committed = c.At
		}
		from := max(r.Committed, 0)
		if r.HighWatermark >= 0 {
			r.LagHWM = max(r.HighWatermark-from, 0)
		}
		if r.LastStableOffset >= 0 {
			r.LagLSO = max(r.LastStableOffset-from, 0)
			r.OpenTransaction = r.HighWatermark > r.LastStableOffset
		}
		rows = append(rows, r)
	})
	sort.Slice(rows, func(i, j int) bool {
		return rows[i].Topic < rows[j].Topic || rows[i].Topic == rows[j].Topic && rows[i].Partition < rows[j].Partition
	})
	return rows
}

// offsetCell prints an offset or lag, or "-" when unknown.
func offsetCell(o int64) string {
	if o < 0 {
		return "-"
	}
	return fmt.Sprint(o)
}
