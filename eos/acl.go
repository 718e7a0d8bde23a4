package eos

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/internal/engine"
	"github.com/eosflow/eosflow/internal/runcfg"
	"github.com/eosflow/eosflow/topology"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ErrNotAuthorized matches every *AuthorizationError.
var ErrNotAuthorized = errors.New("eos: not authorized")

// ACL is one permission an application needs, as kafka-acls.sh names it,
// so an AuthorizationError can print the command that grants it.
type ACL struct {
	Operation string // Read, Write or IdempotentWrite
	Resource  string // topic, group, transactional-id or cluster
	Name      string // the resource's name, or its prefix when Prefixed; "" for the cluster
	Prefixed  bool   // the ACL covers every name starting with Name
}

// Flags returns the kafka-acls.sh flags that grant a, e.g.
// "--operation Read --topic orders".
func (a ACL) Flags() string {
	var b strings.Builder
	b.WriteString("--operation " + a.Operation)
	if a.Prefixed {
		b.WriteString(" --resource-pattern-type prefixed")
	}
	b.WriteString(" --" + a.Resource)
	if a.Name != "" {
		b.WriteString(" " + a.Name)
	}
	return b.String()
}

// AuthorizationError means the brokers refused the application's
// principal an operation: no retry or new client can change an ACL, so
// Run stops, before committing anything, and names the grants that fix it.
type AuthorizationError struct {
	Principal string   // e.g. User:orders-app; "" when the config names no SASL user
	AppID     string   // the application, for `eosctl doctor --acls`
	Brokers   []string // for the --bootstrap-server of the fix
	Missing   []ACL    // what to grant; Read and Write imply Describe
	Inputs    []string // the topics the app reads (its repartition topics aside), for the doctor command in the message
	Outputs   []string // the topics the app writes
	// Stores and Repartitions name the app's state stores and its
	// GroupBy and Through nodes, whose internal topics (changelogs and
	// repartition topics) need grants too.
	Stores       []string
	Repartitions []string
	Err          error // the broker's answer
}

// Error names the principal, the missing ACLs and the kafka-acls.sh
// commands that grant them, on one line.
func (e *AuthorizationError) Error() string {
	p := e.Principal
	if p == "" {
		p = "'User:<the app's principal>'"
	}
	var what, fix []string
	for _, a := range e.Missing {
		name := a.Name
		if a.Prefixed {
			name += "*"
		}
		what = append(what, strings.TrimSpace(a.Operation+" on "+strings.ReplaceAll(a.Resource, "-", " ")+" "+name))
		fix = append(fix, fmt.Sprintf("kafka-acls.sh --bootstrap-server %s --add --allow-principal %s %s",
			strings.Join(e.Brokers, ","), p, a.Flags()))
	}
	doctor := []string{"EOS_APP_ID=" + e.AppID, "eosctl", "doctor", "--acls"}
	if e.Principal != "" {
		doctor = append(doctor, "--principal", e.Principal)
	}
	for _, t := range e.Inputs {
		doctor = append(doctor, "--input-topic", t)
	}
	for _, t := range e.Outputs {
		doctor = append(doctor, "--output-topic", t)
	}
	for _, s := range e.Stores {
		doctor = append(doctor, "--store", s)
	}
	for _, n := range e.Repartitions {
		doctor = append(doctor, "--repartition", n)
	}
	return fmt.Sprintf("eos: %s is not authorized (%v): it needs %s; grant it with: %s; `%s` prints every ACL the app needs",
		orUnknown(e.Principal), e.Err, strings.Join(what, " and "), strings.Join(fix, " && "), strings.Join(doctor, " "))
}

func orUnknown(p string) string {
	if p == "" {
		return "the app's principal"
	}
	return p
}

// Unwrap exposes the broker's error.
func (e *AuthorizationError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrNotAuthorized) hold.
func (e *AuthorizationError) Is(target error) bool { return target == ErrNotAuthorized }

// principal is the Kafka principal of a SASL user, or "" when the
// config authenticates some other way.
func principal(c config.Config) string {
	if c.SASL.Mechanism != "" && c.SASL.Username != "" {
		return "User:" + c.SASL.Username
	}
	return ""
}

// authz turns the brokers' authorization refusals into an
// *AuthorizationError naming the grants that fix them. It holds what the
// app reads, writes and keeps, fixed when the Runner is made.
type authz struct {
	cfg          config.Config
	consumed     []string // the topics consumed: the sources' and the repartition topics
	inputs       []string // the sources' topics, for the doctor command
	outputs      []string
	stores       []string
	repartitions []string // the GroupBy and Through nodes
}

// newAuthz is the authz of an app whose engine is proc and whose stores
// are specs.
func newAuthz(cfg config.Config, top *topology.Topology, proc *engine.Engine, consumed []string) *authz {
	a := &authz{cfg: cfg, consumed: consumed, inputs: top.InputTopics(), outputs: top.OutputTopics()}
	for _, s := range proc.StoreSpecs() {
		a.stores = append(a.stores, s.Name)
	}
	for _, rp := range proc.Repartitions() {
		// The topic is app_id-NODE-repartition; doctor wants the node.
		node := strings.TrimSuffix(strings.TrimPrefix(rp.Topic, cfg.AppID+"-"), "-repartition")
		a.repartitions = append(a.repartitions, node)
	}
	return a
}

// err is errOp for a refusal whose operation the caller does not know.
// topics are the topics the refused request named; without them a topic
// refusal blames every output topic, as only producing fails without
// naming its topic. Other errors are returned as they are.
func (a *authz) err(err error, topics ...string) error {
	return a.errOp(err, "", topics...)
}

// topicError is an error about one topic, such as a refused produce.
type topicError struct {
	topic string
	op    string // the operation refused, if known (a produce: Write)
	err   error
}

func (e *topicError) Error() string { return "topic " + e.topic + ": " + e.err.Error() }
func (e *topicError) Unwrap() error { return e.err }

// errOp is err for a topic operation known to the caller
// (Create, Read, Write); with op "" a topic the app consumes needs Read
// and any other Write.
func (a *authz) errOp(err error, op string, topics ...string) error {
	var ae *AuthorizationError
	if err == nil || errors.As(err, &ae) || !isFatal(err) {
		return err
	}
	e := &AuthorizationError{Principal: principal(a.cfg), AppID: a.cfg.AppID, Brokers: a.cfg.Brokers, Err: err,
		Inputs: a.inputs, Outputs: a.outputs, Stores: a.stores, Repartitions: a.repartitions}
	switch {
	case errors.Is(err, kerr.TransactionalIDAuthorizationFailed):
		e.Err = fmt.Errorf("transactional id %q: %w", runcfg.TransactionalID(a.cfg), err)
		e.Missing = []ACL{{Operation: "Write", Resource: "transactional-id", Name: a.cfg.AppID + config.TransactionalIDSeparator, Prefixed: true}}
	case errors.Is(err, kerr.GroupAuthorizationFailed):
		e.Missing = []ACL{{Operation: "Read", Resource: "group", Name: a.cfg.AppID}}
	case errors.Is(err, kerr.ClusterAuthorizationFailed):
		e.Missing = []ACL{{Operation: "IdempotentWrite", Resource: "cluster"}}
	default: // topics
		var te *topicError
		if len(topics) == 0 && errors.As(err, &te) {
			topics = []string{te.topic}
			if op == "" {
				op = te.op // a repartition topic is consumed too, but a produce needs Write
			}
		}
		if len(topics) == 0 {
			topics = a.outputs
		}
		for _, t := range topics {
			op := op
			switch {
			case op != "":
			case slices.Contains(a.consumed, t):
				op = "Read"
			default:
				op = "Write"
			}
			e.Missing = append(e.Missing, ACL{Operation: op, Resource: "topic", Name: t})
		}
	}
	return e
}

// refusedTopics asks for each topic's metadata and returns those the
// brokers refuse to describe to this principal: a listing of several
// topics fails as a whole and does not say which.
func refusedTopics(ctx context.Context, cl *kgo.Client, topics []string) []string {
	req := kmsg.NewPtrMetadataRequest()
	for _, t := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(t)
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil
	}
	var refused []string
	for _, t := range resp.Topics {
		if t.Topic != nil && errors.Is(kerr.ErrorForCode(t.ErrorCode), kerr.TopicAuthorizationFailed) {
			refused = append(refused, *t.Topic)
		}
	}
	return refused
}
