package integration

import (
	"context"
	"testing"
	"time"

	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/internal/kafkautil"
	"github.com/eosflow/eosflow/tools/conformance"
)

// Under group_protocol consumer on Apache Kafka, an instance that stops
// without leave_group_on_close stays a static member, holding its
// partitions for its return; `eosctl group leave` removes it, as after a
// scale-down, and the remaining instance takes every partition and
// processes every record once.
func TestGroupLeaveConsumerProtocol(t *testing.T) {
	env := realEnv(t)
	in, out, app := env.Name("in"), env.Name("out"), env.Name("app")
	env.CreateTopics(t, 4, in, out)
	cfg := env.Config(app, "a", config.ExactlyOnce)
	cfg.GroupProtocol = config.GroupProtocolConsumer
	a := conformance.Start(t, cfg, conformance.Upper(in, out, nil))
	cfgB := cfg
	cfgB.InstanceID = "b"
	b := conformance.Start(t, cfgB, conformance.Upper(in, out, nil))
	conformance.WaitAssigned(t, env, app, "a")
	conformance.WaitAssigned(t, env, app, "b")
	cl := env.Client(t)
	describe := func() kafkautil.Group {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		g, err := kafkautil.DescribeGroup(ctx, cl, app)
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	if g := describe(); g.Protocol != config.GroupProtocolConsumer {
		t.Fatalf("the group runs the %q protocol; want consumer", g.Protocol)
	}

	b.Stop()
	if err := b.Wait(t, 60*time.Second); err != nil {
		t.Fatalf("b: %v", err)
	}
	time.Sleep(3 * time.Second)
	if _, ok := describe().Member("b"); !ok {
		t.Fatalf("b left the group on its own: %+v; a static member that stops stays until the brokers' session timeout", describe())
	}

	if outText, code := eosctl(t, env, "group", "leave", app, "--instance", "b"); code != 0 {
		t.Fatalf("eosctl group leave: exit %d: %s", code, outText)
	}
	conformance.Until(t, 30*time.Second, "a to hold all four partitions alone", func() bool {
		g := describe()
		m, ok := g.Member("a")
		return ok && len(g.Members) == 1 && g.State == "Stable" && len(m.Assigned[in]) == 4
	})
	const n = 2000
	conformance.Seed(t, env, in, n)
	a.WaitCommitted(t, n, 90*time.Second)
	conformance.ExactlyOnce(t, env, out, n)
}
