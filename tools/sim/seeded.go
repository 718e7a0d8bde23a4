package sim

import (
	"fmt"
	"strings"

	"github.com/eosflow/eosflow/tools/chaos"
	"github.com/twmb/franz-go/pkg/kgo"
)

// seeded is an event-time pipeline's seeded input, with the judge of its
// output: the verifier's own, computed from the seed in plain Go.
type seeded struct {
	recs  []*kgo.Record
	judge func(out []*kgo.Record) error // the failure, of its kind
}

// seedInput draws the input of sched's pipeline from its seed, as verify
// does; nil for the pipelines whose input is verdict's numbered records.
func seedInput(sched Schedule, cfg Config) (*seeded, error) {
	switch sched.Pipeline {
	case Windowed:
		c, err := chaos.NewWindowedCheck(input, cfg.Records, cfg.Keys, cfg.Partitions, sched.Seed)
		if err != nil {
			return nil, err
		}
		return &seeded{c.Records(), func(out []*kgo.Record) error {
			if v := c.Judge(out); !v.OK() {
				return as(KindWindows, fmt.Errorf("%v: %s", v, strings.Join(v.WindowExamples, "; ")))
			}
			return nil
		}}, nil
	case StreamJoin:
		c, err := chaos.NewJoinCheck(input, payments, cfg.Records, cfg.Keys, cfg.Partitions, sched.Seed)
		if err != nil {
			return nil, err
		}
		return &seeded{c.Records(), func(out []*kgo.Record) error {
			if v := c.Judge(out); !v.OK() {
				return as(KindPairs, fmt.Errorf("%v: %s", v, strings.Join(v.PairExamples, "; ")))
			}
			return nil
		}}, nil
	}
	return nil, nil
}
