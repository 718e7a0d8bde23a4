package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/internal/runcfg"
	"github.com/eosflow/eosflow/topology"
)

// aclEntry is one ACL as DescribeACLs returns it.
type aclEntry struct {
	resource kmsg.ACLResourceType
	name     string
	pattern  kmsg.ACLResourcePatternType
	kmsg.DescribeACLsResponseResourceACL
}

// aclNeed is one permission the pipeline needs.
type aclNeed struct {
	resource kmsg.ACLResourceType
	name     string
	op       kmsg.ACLOperation
	flag     string // kafka-acls.sh resource flag for the fix
	why      string
	warnOnly bool
}

// checkACLs reads every ACL (as the connecting principal, which needs
// Describe on the cluster) and evaluates the pipeline principal's needs the
// way Kafka's authorizer does: DENY wins, ALL and implied operations count,
// literal, wildcard and prefixed patterns match. Host-specific ACLs are
// ignored, as the pipeline's host is unknown here.
func (e *doctorEnv) checkACLs(fs *findings) error {
	const check = "acl"
	req := kmsg.NewPtrDescribeACLsRequest()
	req.ResourceType = kmsg.ACLResourceTypeAny
	req.ResourcePatternType = kmsg.ACLResourcePatternTypeAny
	req.Operation = kmsg.ACLOperationAny
	req.PermissionType = kmsg.ACLPermissionTypeAny
	resp, err := req.RequestWith(e.ctx, e.cl)
	if err != nil {
		return kafkaErr("describe acls", err)
	}
	switch err := kerr.ErrorForCode(resp.ErrorCode); {
	case errors.Is(err, kerr.SecurityDisabled):
		fs.ok(check, "no authorizer is configured: ACLs are not enforced")
		return nil
	case errors.Is(err, kerr.ClusterAuthorizationFailed):
		fs.warn(check, "these credentials may not describe ACLs, so the pipeline's ACLs were not checked",
			"run doctor with an admin principal (Describe on the cluster) and --principal set to the pipeline's")
		return nil
	case err != nil:
		return kafkaErr("describe acls", err)
	}
	var acls []aclEntry
	for _, r := range resp.Resources {
		for _, a := range r.ACLs {
			acls = append(acls, aclEntry{r.ResourceType, r.ResourceName, r.ResourcePatternType, a})
		}
	}
	p := e.opts.principal
	switch {
	case p == "" && len(acls) == 0:
		fs.ok(check, "no ACLs are defined (no authorizer, or only super users have access)")
		return nil
	case p == "":
		fs.warn(check, fmt.Sprintf("%d ACLs exist but the pipeline's principal is unknown, so its ACLs were not checked", len(acls)),
			"pass --principal User:NAME (or --sasl-user / a --config with sasl.username)")
		return nil
	case len(acls) == 0:
		fs.warn(check, fmt.Sprintf("no ACLs are defined: if an authorizer is on, only super users can run pipelines, not %s", p),
			"grant the ACLs the pipeline needs (see 'eosctl doctor --help'), or ignore this without an authorizer")
		return nil
	}
	if !strings.Contains(p, ":") {
		return usageErrorf("--principal %q: want TYPE:NAME, e.g. User:orders-app", p)
	}
	for _, n := range e.aclNeeds(fs) {
		allowed := aclAllows(acls, p, n)
		if n.resource == kmsg.ACLResourceTypeTopic && n.op == kmsg.ACLOperationCreate {
			// Kafka's authorizer lets Create on the cluster create any
			// topic.
			allowed = allowed || aclAllows(acls, p, aclNeed{resource: kmsg.ACLResourceTypeCluster, name: "kafka-cluster", op: kmsg.ACLOperationCreate})
		}
		what := fmt.Sprintf("%s on %s %q (%s)", camel(n.op.String()), camel(n.resource.String()), n.name, n.why)
		switch {
		case allowed:
			fs.ok(check, "%s has %s", p, what)
		default:
			detail := fmt.Sprintf("%s lacks %s", p, what)
			if old, ok := e.legacyTxnIDAllowed(acls, p, n); ok {
				detail += fmt.Sprintf("; the ACL matches the old form %q, but transactional ids are now app_id%sinstance_id", old, config.TransactionalIDSeparator)
			}
			fix := fmt.Sprintf("kafka-acls.sh --bootstrap-server %s --add --allow-principal %s --operation %s %s",
				e.cfg.Brokers[0], p, camel(n.op.String()), n.flag)
			if n.warnOnly {
				fs.warn(check, detail, fix)
			} else {
				fs.fail(check, detail, fix)
			}
		}
	}
	return nil
}

// aclNeeds lists what the pipeline needs: the transactional id and group
// come from the config's app_id, topics from the flags, and the internal
// topics from app_id and the --store and --repartition names (and, under
// exactly-once, the offsets mirror app_id-eos-offsets).
func (e *doctorEnv) aclNeeds(fs *findings) []aclNeed {
	var needs []aclNeed
	c := e.cfg
	if c.AppID == "" {
		fs.warn("acl", "no app_id is known, so the transactional id and group ACLs were not checked",
			"pass --config with the pipeline's app_id (or set EOS_APP_ID)")
	} else {
		if c.Guarantee == config.ExactlyOnce {
			// The fix grants the prefix app_id: so that it covers every
			// instance of the application, not just this one.
			txnID := runcfg.TransactionalID(c)
			flag := "--resource-pattern-type prefixed --transactional-id " + c.AppID + config.TransactionalIDSeparator
			needs = append(needs,
				aclNeed{kmsg.ACLResourceTypeTransactionalId, txnID, kmsg.ACLOperationWrite, flag, "to run transactions", false},
				aclNeed{kmsg.ACLResourceTypeTransactionalId, txnID, kmsg.ACLOperationDescribe, flag, "to find its coordinator", false})
		}
		needs = append(needs, aclNeed{kmsg.ACLResourceTypeGroup, c.AppID, kmsg.ACLOperationRead, "--group " + c.AppID, "to join the group and commit offsets", false})
	}
	if c.Guarantee != config.AtMostOnce && c.Guarantee != config.AtLeastOnce {
		needs = append(needs, aclNeed{kmsg.ACLResourceTypeCluster, "kafka-cluster", kmsg.ACLOperationIdempotentWrite, "--cluster",
			"for idempotent producing on brokers before Kafka 2.8; later ones accept Write on a topic or transactional id", true})
	}
	for _, t := range append(append([]string{}, e.opts.inputTopics...), e.opts.topics...) {
		needs = append(needs, aclNeed{kmsg.ACLResourceTypeTopic, t, kmsg.ACLOperationRead, "--topic " + t, "to consume it", false})
	}
	for _, t := range append(append([]string{}, e.opts.outputTopics...), e.opts.topics...) {
		needs = append(needs, aclNeed{kmsg.ACLResourceTypeTopic, t, kmsg.ACLOperationWrite, "--topic " + t, "to produce to it", false})
	}
	if c.AppID == "" {
		return needs // internal topics are named after the app
	}
	topic := func(t string, op kmsg.ACLOperation, why string) aclNeed {
		return aclNeed{kmsg.ACLResourceTypeTopic, t, op, "--topic " + t, why, false}
	}
	for _, s := range e.opts.stores {
		t := topology.ChangelogTopic(c.AppID, s)
		needs = append(needs,
			topic(t, kmsg.ACLOperationCreate, "to create the changelog of store "+s+" on first start"),
			topic(t, kmsg.ACLOperationRead, "to restore store "+s+" from its changelog"),
			topic(t, kmsg.ACLOperationWrite, "to write the changes of store "+s+" in each transaction"))
	}
	for _, n := range e.opts.repartitions {
		t := topology.RepartitionTopic(c.AppID, n)
		needs = append(needs,
			topic(t, kmsg.ACLOperationCreate, "to create the repartition topic of "+n+" on first start"),
			topic(t, kmsg.ACLOperationRead, "to read back the records "+n+" sends through it"),
			topic(t, kmsg.ACLOperationWrite, "to write the records "+n+" sends through it"),
			topic(t, kmsg.ACLOperationDelete, "to delete the records the group has consumed (DeleteRecords), without which the topic grows without bound"))
	}
	if c.Guarantee == config.ExactlyOnce {
		t := topology.OffsetsTopic(c.AppID)
		needs = append(needs,
			topic(t, kmsg.ACLOperationCreate, "to create the offsets mirror on first start"),
			topic(t, kmsg.ACLOperationRead, "to read where the last commit reached when taking partitions over"),
			topic(t, kmsg.ACLOperationWrite, "to mirror the committed input offsets in each transaction"))
	}
	return needs
}

// legacyTxnIDAllowed reports whether n, a transactional id permission that
// is missing, would be granted for the id's old app_id-instance_id form, and
// returns that form: ACLs written for it (often the prefix "app_id-") no
// longer match.
func (e *doctorEnv) legacyTxnIDAllowed(acls []aclEntry, principal string, n aclNeed) (string, bool) {
	if n.resource != kmsg.ACLResourceTypeTransactionalId {
		return "", false
	}
	old := n
	old.name = legacyTxnID(e.cfg)
	return old.name, aclAllows(acls, principal, old)
}

// legacyTxnID is the transactional id earlier versions used for c:
// app_id-instance_id, which two applications could share ("orders-eu" + "1"
// and "orders" + "eu-1").
func legacyTxnID(c config.Config) string {
	return c.AppID + "-" + c.InstanceID
}

// aclAllows evaluates principal's access for n like Kafka's authorizer.
func aclAllows(acls []aclEntry, principal string, n aclNeed) bool {
	allowed := false
	for _, a := range acls {
		if a.resource != n.resource || a.Host != "*" || !aclNameMatches(a, n.name) ||
			a.Principal != principal && a.Principal != "User:*" || !aclOpCovers(a.Operation, n.op, a.PermissionType) {
			continue
		}
		if a.PermissionType == kmsg.ACLPermissionTypeDeny {
			return false
		}
		allowed = allowed || a.PermissionType == kmsg.ACLPermissionTypeAllow
	}
	return allowed
}

// aclNameMatches matches a resource name against an ACL's pattern.
func aclNameMatches(a aclEntry, name string) bool {
	switch a.pattern {
	case kmsg.ACLResourcePatternTypeLiteral:
		return a.name == name || a.name == "*"
	case kmsg.ACLResourcePatternTypePrefixed:
		return strings.HasPrefix(name, a.name)
	}
	return false
}

// aclOpCovers reports whether an ACL for op grants or denies want. ALL
// covers everything; an ALLOW for Read, Write, Delete or Alter implies
// Describe (a DENY does not imply anything).
func aclOpCovers(op, want kmsg.ACLOperation, perm kmsg.ACLPermissionType) bool {
	if op == want || op == kmsg.ACLOperationAll {
		return true
	}
	if want == kmsg.ACLOperationDescribe && perm == kmsg.ACLPermissionTypeAllow {
		switch op {
		case kmsg.ACLOperationRead, kmsg.ACLOperationWrite, kmsg.ACLOperationDelete, kmsg.ACLOperationAlter:
			return true
		}
	}
	return false
}

// camel spells Kafka's enum names as its tools print them:
// TRANSACTIONAL_ID → TransactionalId, IDEMPOTENT_WRITE → IdempotentWrite.
func camel(s string) string {
	var b strings.Builder
	for _, w := range strings.Split(strings.ToLower(s), "_") {
		if w != "" {
			b.WriteString(strings.ToUpper(w[:1]) + w[1:])
		}
	}
	return b.String()
}
