package main

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eosflow/eosflow/config"
)

// maxProbedLag is the largest lag skipMarkers reads. A caught-up partition
// trails by its commit marker and the odd aborted transaction; a lag above
// this is left as it is rather than read.
const maxProbedLag = 1000

// skipMarkers sets to 0 the LSO lag of the rows whose offsets from the
// committed offset up to the LSO hold no record a read_committed consumer
// would get: only transaction markers and aborted records. Consumers commit
// the offset after their last record, so a caught-up one trails the LSO by
// the commit marker that followed it. Rows it cannot read (no commit, a lag
// above maxProbedLag, a fetch error, time up) keep their offset count.
func skipMarkers(ctx context.Context, cfg config.Config, rows []partitionLagJSON) {
	probed := map[string]map[int32]*partitionLagJSON{}
	consume := map[string]map[int32]kgo.Offset{}
	left := 0
	for i := range rows {
		r := &rows[i]
		if r.Committed < 0 || r.LagLSO <= 0 || r.LagLSO > maxProbedLag {
			continue
		}
		if probed[r.Topic] == nil {
			probed[r.Topic] = map[int32]*partitionLagJSON{}
			consume[r.Topic] = map[int32]kgo.Offset{}
		}
		probed[r.Topic][r.Partition] = r
		consume[r.Topic][r.Partition] = kgo.NewOffset().At(r.Committed)
		left++
	}
	if left == 0 {
		return
	}
	opts, err := cfg.KgoOpts()
	if err != nil {
		return
	}
	cl, err := kgo.NewClient(append(opts, kgo.ConsumePartitions(consume),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(), // the markers are what a caught-up lag is made of
		kgo.ConsumeResetOffset(kgo.NoResetOffset()))...)
	if err != nil {
		return
	}
	defer cl.Close()
	readMarkers(ctx, cl, probed, left)
}

// readMarkers polls until each probed row is settled: at its first
// record a consumer would get (its lag stands), or past its LSO with only
// markers seen (its lag becomes 0). It gives up after two idle polls.
func readMarkers(ctx context.Context, cl *kgo.Client, probed map[string]map[int32]*partitionLagJSON, left int) {
	for idle := 0; left > 0 && idle < 2 && ctx.Err() == nil; {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		fs := cl.PollFetches(pctx)
		cancel()
		idle++
		fs.EachPartition(func(p kgo.FetchTopicPartition) {
			r := probed[p.Topic][p.Partition]
			if r == nil {
				return
			}
			settled := p.Err != nil
			for _, rec := range p.Records {
				if settled {
					break
				}
				idle = 0
				switch {
				case rec.Offset >= r.LastStableOffset || rec.Attrs.IsControl() && rec.Offset+1 >= r.LastStableOffset:
					r.LagLSO, settled = 0, true
				case !rec.Attrs.IsControl():
					settled = true
				}
			}
			if settled {
				delete(probed[p.Topic], p.Partition)
				cl.PauseFetchPartitions(map[string][]int32{p.Topic: {p.Partition}})
				left--
			}
		})
	}
}
