package chaos

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A run that timed out because the broker stopped serving its group (a
// __consumer_offsets partition left FAILED, answering NOT_COORDINATOR)
// says so, naming the group and the answer; a coordinator that serves
// the group is not blamed.
func TestUnservedGroupNamesACoordinatorThatServesNothing(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.RetryTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx := context.Background()
	if why := unservedGroup(ctx, adm, "g", 2*time.Second); why != "" {
		t.Fatalf("a coordinator that serves the group was blamed: %s", why)
	}
	h := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.OffsetFetch}, Err: kerr.NotCoordinator, Count: -1})
	defer h.Remove()
	why := unservedGroup(ctx, adm, "g", 2*time.Second)
	if h.Hits() == 0 {
		t.Fatal("no offset fetch was refused: the test proves nothing")
	}
	for _, want := range []string{"group g", "NOT_COORDINATOR", "restart the broker"} {
		if !strings.Contains(why, want) {
			t.Fatalf("unservedGroup = %q; want it to name %q", why, want)
		}
	}
}
