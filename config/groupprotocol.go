package config

import "fmt"

// GroupProtocol is the consumer group protocol the pipeline's members
// speak; a type of its own so that a typo is caught by Validate.
type GroupProtocol string

// The group protocols.
const (
	// GroupProtocolClassic is the protocol every Kafka version speaks: the
	// members join (JoinGroup, SyncGroup) and one of them, the leader,
	// assigns the partitions; session_timeout and rebalance_timeout are
	// the client's. The empty value means it too.
	GroupProtocolClassic GroupProtocol = "classic"
	// GroupProtocolConsumer is KIP-848's consumer protocol: members
	// heartbeat (ConsumerGroupHeartbeat) and the broker's group
	// coordinator assigns partitions incrementally, so a rebalance stops
	// only the partitions that move. It needs Apache Kafka 4.0 or later
	// (4.3 or later recommended); the brokers' group.consumer.* settings
	// (heartbeat interval, session timeout) replace session_timeout.
	GroupProtocolConsumer GroupProtocol = "consumer"
)

// GroupProtocols lists the protocols, the default first, for help text
// and error messages.
func GroupProtocols() []GroupProtocol {
	return []GroupProtocol{GroupProtocolClassic, GroupProtocolConsumer}
}

// validateGroupProtocol names an unknown group_protocol and the values it
// may take.
func (c Config) validateGroupProtocol() []error {
	switch c.GroupProtocol {
	case "", GroupProtocolClassic, GroupProtocolConsumer:
		return nil
	}
	return []error{&FieldError{Field: "group_protocol", Value: string(c.GroupProtocol), Problem: fmt.Sprintf(
		"unknown group protocol; use %s (the default: members join and their leader assigns partitions) or %s (KIP-848: the broker assigns partitions incrementally; needs Apache Kafka 4.0 or later)",
		GroupProtocolClassic, GroupProtocolConsumer)}}
}
