package engine_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/internal/engine"
	"github.com/eosflow/eosflow/processor"
	"github.com/eosflow/eosflow/topology"
	"github.com/twmb/franz-go/pkg/kgo"
)

// A partitioned sink whose topic does not exist is the sink's error, which
// its policy settles (Skip here); any other failure to learn the partition
// count is the runtime's, which no policy may drop the record for.
func TestPartitionLookupErrors(t *testing.T) {
	errBroker := errors.New("metadata request timed out")
	for _, tc := range []struct {
		name    string
		err     error
		want    engine.Outcome
		policyd bool
	}{
		{"unknown topic", fmt.Errorf("%w: %q", processor.ErrUnknownTopic, "out"), engine.Skipped, true},
		{"broker not answering", errBroker, engine.Failed, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			top := topology.New()
			in := topology.Source(top, "in", codec.String())
			topology.To(in, "out", codec.String(), topology.Named("sink"),
				topology.Partitioner(func(topology.Record[string], int32) int32 { return 0 }))
			top.OnError("sink", topology.Skip())
			e, err := engine.New(top, engine.Partitions(func(string) (int32, error) { return 0, tc.err }))
			if err != nil {
				t.Fatal(err)
			}
			got, err := e.Process(t.Context(), &kgo.Record{Topic: "in", Offset: 3, Value: []byte("v")}, func(*kgo.Record) {})
			var ne *topology.NodeError
			if got != tc.want || errors.As(err, &ne) != false || (err == nil) != tc.policyd {
				t.Fatalf("outcome %v, error %v; want %v, a node error only under the policy", got, err, tc.want)
			}
			if !tc.policyd && !errors.Is(err, errBroker) {
				t.Fatalf("error %v, want the lookup's", err)
			}
		})
	}
}
