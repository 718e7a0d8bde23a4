package eos

import (
	"context"
	"strings"
	"testing"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/topology"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap/zaptest"
)

// An instance with only the least-privilege grants cannot look for its
// hanging transactions on __consumer_offsets; the stall it may then meet
// must say which grants, or which admin commands, would end it, instead
// of blaming an open transaction alone.
func TestHangingRepairNamesMissingGrants(t *testing.T) {
	lit := kmsg.ACLResourcePatternTypeLiteral
	allow := func(r kmsg.ACLResourceType, name string, op kmsg.ACLOperation) kfake.ACL {
		return kfake.ACL{Resource: r, Name: name, Pattern: lit, Operation: op, Allow: true}
	}
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "in", "out"), kfake.EnableSASL(), kfake.EnableACLs(),
		kfake.Superuser(config.SASLScramSHA512, "admin", "admin-secret"),
		kfake.User(config.SASLScramSHA512, "app-user", "app-secret",
			allow(kmsg.ACLResourceTypeTopic, "in", kmsg.ACLOperationRead),
			allow(kmsg.ACLResourceTypeTopic, "out", kmsg.ACLOperationWrite),
			allow(kmsg.ACLResourceTypeGroup, "app", kmsg.ACLOperationRead)))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, tc := range []struct {
		user, password string
		denied         bool
	}{{"app-user", "app-secret", true}, {"admin", "admin-secret", false}} {
		t.Run(tc.user, func(t *testing.T) {
			cfg := config.Default()
			cfg.Brokers, cfg.AppID, cfg.InstanceID = c.ListenAddrs(), "app", "1"
			cfg.SASL = config.SASL{Mechanism: config.SASLScramSHA512, Username: tc.user, Password: tc.password}
			top := topology.New("hanging")
			topology.To(topology.Source(top, "in", "in", codec.Bytes()), "out", "out", codec.Bytes())
			r, err := New(cfg, top)
			if err != nil {
				t.Fatal(err)
			}
			r.log = zaptest.NewLogger(t)
			opts, err := cfg.KgoOpts()
			if err != nil {
				t.Fatal(err)
			}
			if r.admin, err = kgo.NewClient(opts...); err != nil {
				t.Fatal(err)
			}
			defer r.admin.Close()
			r.pid, r.pidEpoch = 1, 1
			if n := r.abortOwnHanging(context.Background()); n != 0 {
				t.Fatalf("aborted %d transactions where none hang", n)
			}
			if !tc.denied {
				if r.hangingDenied != "" {
					t.Fatalf("a super user was told: %s", r.hangingDenied)
				}
				return
			}
			for _, want := range []string{"__consumer_offsets", "eosctl txn hanging", "eosctl txn abort"} {
				if !strings.Contains(r.hangingDenied, want) {
					t.Errorf("%q does not name %q", r.hangingDenied, want)
				}
			}
		})
	}
}
