package topology_test

import (
	"fmt"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/state/pebble"
	"github.com/eosflow/eosflow/topology"
)

// LatestPerCommit makes an aggregation emit each key's last update of a
// batch instead of one per record: a page viewed 1,000 times in a batch
// yields one count on the output topic, written in the batch's transaction
// with the changelog and the input offsets.
func ExampleLatestPerCommit() {
	top := topology.New()
	views := topology.Source(top, "page-views", codec.Bytes()) // key = the page
	counts := topology.Count(topology.GroupByKey(views, "by-page"), "view-counts", pebble.New(), topology.LatestPerCommit())
	topology.ToTable(counts, "page-view-counts", codec.JSON[int64]())
	fmt.Print(top.Describe())
	// Output:
	// Topology
	//   Sub-topology: 0
	//     Source: page-views (topic: page-views, codec: bytes)
	//       --> by-page
	//     Processor: by-page (GroupByKey)
	//       --> view-counts
	//       <-- page-views
	//     Processor: view-counts (Count, stores: view-counts, emit: latest per commit)
	//       --> page-view-counts
	//       <-- by-page
	//     Sink: page-view-counts (topic: page-view-counts, codec: json)
	//       <-- view-counts
	//   Store: view-counts (engine: pebble, changelog: <app_id>-view-counts-changelog)
	//       used by: view-counts
	//   Default on error: fail
}
