package processor

// Dead-letter headers, added after the original record's own headers, so
// that a consumer of the dead-letter topic can tell why and from where a
// record came (and replay it to its source).
const (
	HeaderNode            = "eosflow.error.node"
	HeaderError           = "eosflow.error.message"
	HeaderStack           = "eosflow.error.stack"
	HeaderSourceTopic     = "eosflow.source.topic"
	HeaderSourcePartition = "eosflow.source.partition"
	HeaderSourceOffset    = "eosflow.source.offset"
	HeaderSourceTimestamp = "eosflow.source.timestamp"
)

// Expiry headers, which the dead letter of an expired entry (an unmatched
// record of a left or outer stream join, a final-only window's result)
// carries instead of the source headers: its key, value and timestamp are
// the entry's own, it was never read from a topic and cannot be replayed
// to one, and the record they name is the one whose stream time expired
// it, which is not at fault.
const (
	HeaderExpiryNode            = "eosflow.expiry.node" // the join or window node
	HeaderExpiryWhat            = "eosflow.expiry.what" // what expired, e.g. "unmatched left record"
	HeaderExpirySourceTopic     = "eosflow.expiry.source.topic"
	HeaderExpirySourcePartition = "eosflow.expiry.source.partition"
	HeaderExpirySourceOffset    = "eosflow.expiry.source.offset"
	HeaderExpirySourceTimestamp = "eosflow.expiry.source.timestamp"
)
