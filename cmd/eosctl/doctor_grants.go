package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// aclGrant is one line of `eosctl doctor --acls`: an ACL the pipeline
// needs and the kafka-acls.sh command that grants it.
type aclGrant struct {
	Operation string `json:"operation"`
	Resource  string `json:"resource"`
	Name      string `json:"name"`
	Pattern   string `json:"pattern"`
	Why       string `json:"why"`
	Optional  bool   `json:"optional,omitempty"` // only for brokers before Kafka 2.8
	Command   string `json:"command"`
}

// grants lists the least-privilege ACLs of the pipeline as kafka-acls.sh
// commands for principal, without asking the cluster. A Describe the same
// principal's Read or Write on the resource implies is left out.
func (e *doctorEnv) grants(principal string) ([]aclGrant, error) {
	if principal == "" {
		return nil, usageErrorf("--acls needs the pipeline's principal: pass --principal User:NAME (or --sasl-user / a --config with sasl.username)")
	}
	if !strings.Contains(principal, ":") {
		return nil, usageErrorf("--principal %q: want TYPE:NAME, e.g. User:orders-app", principal)
	}
	if e.cfg.AppID == "" {
		return nil, usageErrorf("--acls needs the pipeline's app_id: pass --config with app_id, or set EOS_APP_ID")
	}
	var fs findings
	needs := e.aclNeeds(&fs)
	implied := map[string]bool{}
	for _, n := range needs {
		if n.op == kmsg.ACLOperationRead || n.op == kmsg.ACLOperationWrite {
			implied[n.flag] = true
		}
	}
	var out []aclGrant
	seen := map[string]bool{}
	for _, n := range needs {
		if n.op == kmsg.ACLOperationDescribe && implied[n.flag] {
			continue
		}
		op := camel(n.op.String())
		cmd := fmt.Sprintf("kafka-acls.sh --bootstrap-server %s --add --allow-principal %s --operation %s %s",
			strings.Join(e.cfg.Brokers, ","), principal, op, n.flag)
		if seen[cmd] {
			continue
		}
		seen[cmd] = true
		pattern := "literal"
		if strings.Contains(n.flag, "--resource-pattern-type prefixed") {
			pattern = "prefixed"
		}
		name := n.name
		if n.resource == kmsg.ACLResourceTypeTransactionalId && pattern == "prefixed" {
			name = e.cfg.AppID + ":" // the flag grants the prefix, not this instance's id
		}
		out = append(out, aclGrant{Operation: op, Resource: camel(n.resource.String()), Name: name, Pattern: pattern,
			Why: n.why, Optional: n.warnOnly, Command: cmd})
	}
	return out, nil
}

// writeGrants prints grants as a script: one command per line, each after
// a comment saying why, optional ones commented out.
func writeGrants(w io.Writer, grants []aclGrant) error {
	var b strings.Builder
	for _, g := range grants {
		fmt.Fprintf(&b, "# %s on %s %q: %s\n", g.Operation, g.Resource, g.Name, g.Why)
		if g.Optional {
			b.WriteString("# " + g.Command + "\n")
		} else {
			b.WriteString(g.Command + "\n")
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}
