package config

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"

	"go.uber.org/zap/zapcore"
	"go.yaml.in/yaml/v3"
)

func TestValidateWorkers(t *testing.T) {
	tests := []struct {
		name    string
		change  func(*Config)
		field   string
		mention string
	}{
		{"negative", func(c *Config) { c.Workers = -2 }, "workers", "auto"},
		{"too many", func(c *Config) { c.Workers = MaxWorkers + 1 }, "workers", "more processes"},
		{"instance ids too long", func(c *Config) {
			c.InstanceID = strings.Repeat("w", 248)
			c.Workers = 2
		}, "instance_id", "workers' instance ids"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := valid()
			tt.change(&c)
			err := c.Validate()
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Field != tt.field || !strings.Contains(err.Error(), tt.mention) {
				t.Fatalf("Validate = %v; want a *FieldError for %s mentioning %q", err, tt.field, tt.mention)
			}
			if strings.Count(err.Error(), "\n") != 0 {
				t.Errorf("one change produced several errors: %q", err)
			}
		})
	}
	for _, w := range []Workers{0, 1, 2, WorkersAuto, MaxWorkers} {
		c := valid()
		c.Workers = w
		if err := c.Validate(); err != nil {
			t.Errorf("workers %s: %v", w, err)
		}
	}
}

func TestWorkerCountAndIDs(t *testing.T) {
	c := valid()
	for w, want := range map[Workers]int{0: 1, 1: 1, 3: 3, WorkersAuto: runtime.GOMAXPROCS(0)} {
		c.Workers = w
		if got := c.WorkerCount(); got != want {
			t.Errorf("workers %s: WorkerCount %d, want %d", w, got, want)
		}
	}
	c.Workers = 3
	wc := c.ForWorker(2)
	if wc.InstanceID != "worker-0_2" || wc.Workers != 1 || wc.TransactionalID() != "orders:worker-0_2" {
		t.Fatalf("ForWorker(2): instance %q workers %s txn id %q", wc.InstanceID, wc.Workers, wc.TransactionalID())
	}
	if wc.StateDirFor() == c.StateDirFor() || wc.StateDirFor() == c.ForWorker(1).StateDirFor() {
		t.Fatalf("workers share a state directory: %s", wc.StateDirFor())
	}
}

// sessions are the configurations the runtime runs for c: c itself under
// one worker, ForWorker(i) for each worker otherwise.
func sessions(c Config) []Config {
	n := c.WorkerCount()
	if n == 1 {
		return []Config{c}
	}
	out := make([]Config, n)
	for i := range out {
		out[i] = c.ForWorker(i)
	}
	return out
}

// sessionIDs are the ids a session must not share with another
// instance's: its transactional.id, group.instance.id and state directory.
func sessionIDs(c Config) []string {
	return []string{"transactional.id " + c.TransactionalID(), "group.instance.id " + c.InstanceID, "state directory " + c.StateDirFor()}
}

// idOwners records which instance each session id belongs to and
// returns a description of the first id another instance already owns.
type idOwners map[string]string

func (o idOwners) claim(c Config) string {
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
	deployment := func(id string, w Workers) Config {
		c := valid()
		c.InstanceID, c.Workers, c.StateDir = id, w, "/var/lib/eosflow"
		return c
	}
	for _, tt := range []struct {
		a, b   string
		wa, wb Workers
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
			for _, w := range []Workers{1, 2, 3, 11} {
				if c := deployment(n, w); c.Validate() == nil {
					if clash := owners.claim(c); clash != "" {
						t.Fatal(clash)
					}
				}
			}
		}
	}
}

// An instance_id with the separator of the workers' ids is refused,
// naming the separator and a name without it.
func TestValidateRefusesWorkerSeparator(t *testing.T) {
	for _, id := range []string{"pod_1", "_", "a_b_c"} {
		c := valid()
		c.InstanceID = id
		err := c.Validate()
		var fe *FieldError
		fix := strings.ReplaceAll(id, "_", "-")
		if !errors.As(err, &fe) || fe.Field != "instance_id" || !strings.Contains(err.Error(), `must not contain "_"`) || !strings.Contains(err.Error(), "e.g. "+fix) {
			t.Fatalf("instance_id %q: Validate = %v; want a *FieldError for instance_id naming \"_\" and suggesting %s", id, err, fix)
		}
		if strings.Count(err.Error(), "\n") != 0 {
			t.Errorf("instance_id %q produced several errors: %q", id, err)
		}
	}
}

// InstanceIDs lists the group.instance.ids of the sessions the runtime
// runs for a config, and each session's configuration is valid (the
// runtime validates it again).
func TestInstanceIDs(t *testing.T) {
	for _, w := range []Workers{0, 1, 3} {
		c := valid()
		c.Workers = w
		var want []string
		for _, s := range sessions(c) {
			want = append(want, s.InstanceID)
			if err := s.Validate(); err != nil {
				t.Errorf("workers %s: session %s: %v", w, s.InstanceID, err)
			}
		}
		if got := c.InstanceIDs(); !slices.Equal(got, want) {
			t.Errorf("workers %s: InstanceIDs %q, want %q", w, got, want)
		}
	}
}

func TestLoadWorkers(t *testing.T) {
	for _, tt := range []struct {
		yaml, env string
		want      Workers
	}{
		{"", "", 0},
		{"workers: 4\n", "", 4},
		{"workers: auto\n", "", WorkersAuto},
		{"workers: 4\n", "auto", WorkersAuto},
		{"workers: auto\n", "3", 3},
		{"", " AUTO ", WorkersAuto},
	} {
		clearEnv(t)
		t.Setenv("EOS_WORKERS", tt.env)
		got, err := Load(writeFile(t, "app.yaml", tt.yaml))
		if err != nil {
			t.Fatalf("yaml %q env %q: %v", tt.yaml, tt.env, err)
		}
		if got.Workers != tt.want {
			t.Errorf("yaml %q env %q: workers %s, want %s", tt.yaml, tt.env, got.Workers, tt.want)
		}
	}

	clearEnv(t)
	_, err := Load(writeFile(t, "app.yaml", "workers: many\n"))
	if err == nil || !strings.Contains(err.Error(), "workers") || !strings.Contains(err.Error(), "auto") || !strings.Contains(err.Error(), "line 1") {
		t.Fatalf("workers: many = %v; want an error naming workers, its line and auto", err)
	}
	t.Setenv("EOS_WORKERS", "1.5")
	_, err = Load("")
	if err == nil || !strings.Contains(err.Error(), "EOS_WORKERS") || !strings.Contains(err.Error(), "auto") {
		t.Fatalf("EOS_WORKERS=1.5 = %v; want an error naming EOS_WORKERS and auto", err)
	}
}

func TestWorkersPrintedAsWritten(t *testing.T) {
	c := valid()
	if strings.Contains(c.String(), "workers") {
		t.Errorf("unset workers printed: %s", c)
	}
	c.Workers = WorkersAuto
	if !strings.Contains(c.String(), "workers=auto") {
		t.Errorf("String() = %s, want workers=auto", c)
	}
	enc := zapcore.NewMapObjectEncoder()
	_ = c.MarshalLogObject(enc)
	if enc.Fields["workers"] != "auto" {
		t.Errorf("logged workers = %#v, want auto", enc.Fields["workers"])
	}
	out, err := yaml.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	clearEnv(t)
	back, err := Load(writeFile(t, "app.yaml", string(out)))
	if err != nil || back.Workers != WorkersAuto {
		t.Fatalf("round trip through YAML: workers %s, err %v\n%s", back.Workers, err, out)
	}
}
