package runcfg

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/eosflow/eosflow/config"
)

func TestTransactionalID(t *testing.T) {
	c := valid()
	if got, want := TransactionalID(c), "orders:worker-0"; got != want {
		t.Fatalf("TransactionalID = %q, want %q", got, want)
	}
}

// Names may contain '-', so joining them with '-' would let two
// applications share a transactional.id and fence each other.
func TestTransactionalIDUnambiguous(t *testing.T) {
	a, b := valid(), valid()
	a.AppID, a.InstanceID = "orders-eu", "1"
	b.AppID, b.InstanceID = "orders", "eu-1"
	for _, c := range []config.Config{a, b} {
		if err := c.Validate(); err != nil {
			t.Fatalf("Validate: %v", err)
		}
	}
	if TransactionalID(a) == TransactionalID(b) {
		t.Fatalf("app %q instance %q and app %q instance %q share transactional.id %q",
			a.AppID, a.InstanceID, b.AppID, b.InstanceID, TransactionalID(a))
	}
	if got, want := TransactionalID(a), "orders-eu:1"; got != want {
		t.Errorf("TransactionalID = %q, want %q", got, want)
	}
	// The separator must be outside the names' alphabet, or the same
	// collision comes back with it.
	for _, c := range []config.Config{a, b} {
		c.AppID += config.TransactionalIDSeparator
		var fe *config.FieldError
		if err := c.Validate(); !errors.As(err, &fe) || fe.Field != "app_id" {
			t.Errorf("app_id %q: Validate = %v; want it refused", c.AppID, err)
		}
	}
}

func TestWorkerCountAndIDs(t *testing.T) {
	c := valid()
	for w, want := range map[config.Workers]int{0: 1, 1: 1, 3: 3, config.WorkersAuto: runtime.GOMAXPROCS(0)} {
		c.Workers = w
		if got := WorkerCount(c); got != want {
			t.Errorf("workers %s: WorkerCount %d, want %d", w, got, want)
		}
	}
	c.Workers = 3
	wc := ForWorker(c, 2)
	if wc.InstanceID != "worker-0_2" || wc.InstanceID != WorkerInstanceID(c, 2) || wc.Workers != 1 || TransactionalID(wc) != "orders:worker-0_2" {
		t.Fatalf("ForWorker(2): instance %q workers %s txn id %q", wc.InstanceID, wc.Workers, TransactionalID(wc))
	}
	if StateDir(wc) == StateDir(c) || StateDir(wc) == StateDir(ForWorker(c, 1)) {
		t.Fatalf("workers share a state directory: %s", StateDir(wc))
	}
}

// Validate counts the workers as WorkerCount does: it refuses a max_memory
// under the least per worker for exactly WorkerCount workers.
func TestValidateCountsWorkersAsWorkerCount(t *testing.T) {
	for _, w := range []config.Workers{0, 1, 3, config.WorkersAuto} {
		c := valid()
		c.Workers = w
		least := config.MinMaxMemory * config.ByteSize(WorkerCount(c))
		c.MaxMemory = least
		if err := c.Validate(); err != nil {
			t.Errorf("workers %s, max_memory %s: %v", w, c.MaxMemory, err)
		}
		c.MaxMemory = least - 1
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "max_memory") {
			t.Errorf("workers %s, max_memory %s: Validate = %v; want it refused", w, c.MaxMemory, err)
		}
	}
}

func TestStateDir(t *testing.T) {
	c := valid()
	c.StateDir = "/var/lib/eosflow"
	if got, want := StateDir(c), "/var/lib/eosflow/orders/worker-0"; got != want {
		t.Errorf("StateDir = %q, want %q", got, want)
	}
	c.StateDir = ""
	if got, want := StateDir(c), filepath.Join(os.TempDir(), "eosflow", "orders", "worker-0"); got != want {
		t.Errorf("StateDir with state_dir unset = %q, want %q", got, want)
	}
}

func TestConsumer(t *testing.T) {
	for _, p := range []config.GroupProtocol{"", config.GroupProtocolClassic, config.GroupProtocolConsumer} {
		c := valid()
		c.GroupProtocol = p
		if got, want := Consumer(c), p == config.GroupProtocolConsumer; got != want {
			t.Errorf("group_protocol %q: Consumer = %v, want %v", p, got, want)
		}
	}
}

// sessions are the configurations the runtime runs for c: c itself under
// one worker, ForWorker(c, i) for each worker otherwise.
func sessions(c config.Config) []config.Config {
	n := WorkerCount(c)
	if n == 1 {
		return []config.Config{c}
	}
	out := make([]config.Config, n)
	for i := range out {
		out[i] = ForWorker(c, i)
	}
	return out
}

// sessionIDs are the ids a session must not share with another
// instance's: its transactional.id, group.instance.id and state directory.
func sessionIDs(c config.Config) []string {
	return []string{"transactional.id " + TransactionalID(c), "group.instance.id " + c.InstanceID, "state directory " + StateDir(c)}
}

// idOwners records which instance each session id belongs to and
// returns a description of the first id another instance already owns.
type idOwners map[string]string

func (o idOwners) claim(c config.Config) string {
	for _, s := range sessions(c) {
		for _, id := range sessionIDs(s) {
			if owner, taken := o[id]; taken && owner != c.InstanceID {
				return fmt.Sprintf("instance %q (workers %s) and instance %q share the %s", c.InstanceID, c.Workers, owner, id)
			}
			o[id] = c.InstanceID
		}
	}
	return ""
}

// Two instances that both pass Validate never share a worker's
// transactional.id, group.instance.id or state directory, whatever their
// names and worker counts.
func TestWorkerIDsNeverCollide(t *testing.T) {
	deployment := func(id string, w config.Workers) config.Config {
		c := valid()
		c.InstanceID, c.Workers, c.StateDir = id, w, "/var/lib/eosflow"
		return c
	}
	for _, tt := range []struct {
		a, b   string
		wa, wb config.Workers
	}{
		{"pod", "pod-1", 2, 1},
		{"pod", "pod-1", 2, 2},
		{"pod", "pod-1", 12, 1},
		{"pod-1", "pod-1-0", 2, 1},
		{"pod", "pod_1", 2, 1},
		{"pod", "pod.1", 2, 1},
	} {
		t.Run(fmt.Sprintf("%s×%s,%s×%s", tt.a, tt.wa, tt.b, tt.wb), func(t *testing.T) {
			a, b := deployment(tt.a, tt.wa), deployment(tt.b, tt.wb)
			if a.Validate() != nil || b.Validate() != nil {
				return // an instance Validate refuses never runs
			}
			owners := idOwners{}
			owners.claim(a)
			if clash := owners.claim(b); clash != "" {
				t.Fatal(clash)
			}
		})
	}

	// Every name of up to four characters from an alphabet rich in
	// separators, at several worker counts.
	const alphabet = "p01-_."
	names := []string{""}
	owners := idOwners{}
	for range 4 {
		var longer []string
		for _, n := range names {
			for _, r := range alphabet {
				longer = append(longer, n+string(r))
			}
		}
		names = longer
		for _, n := range names {
			for _, w := range []config.Workers{1, 2, 3, 11} {
				if c := deployment(n, w); c.Validate() == nil {
					if clash := owners.claim(c); clash != "" {
						t.Fatal(clash)
					}
				}
			}
		}
	}
}

// InstanceIDs lists the group.instance.ids of the sessions the runtime
// runs for a valid config. The runtime validates that config, not the
// sessions' configurations derived from it, whose worker separator
// Validate refuses.
func TestInstanceIDs(t *testing.T) {
	for _, w := range []config.Workers{0, 1, 3} {
		c := valid()
		c.Workers = w
		if err := c.Validate(); err != nil {
			t.Fatalf("workers %s: %v", w, err)
		}
		var want []string
		for _, s := range sessions(c) {
			want = append(want, s.InstanceID)
			if s.Workers > 1 {
				t.Errorf("workers %s: session %s has workers %s, want 1", w, s.InstanceID, s.Workers)
			}
			if w > 1 {
				onlySeparator(t, s)
			}
		}
		if got := InstanceIDs(c); !slices.Equal(got, want) {
			t.Errorf("workers %s: InstanceIDs %q, want %q", w, got, want)
		}
	}
}

// onlySeparator fails t unless Validate refuses worker configuration s
// for the worker separator in its instance_id, and for nothing else: the
// runtime validates the user's configuration, and that must cover the
// rest of each worker's.
func onlySeparator(t *testing.T, s config.Config) {
	t.Helper()
	err := s.Validate()
	var fe *config.FieldError
	if !errors.As(err, &fe) || fe.Field != "instance_id" || !strings.Contains(err.Error(), `must not contain "_"`) || strings.Count(err.Error(), "\n") != 0 {
		t.Errorf("session %s: Validate = %v; want only the refusal of the worker separator", s.InstanceID, err)
	}
}
