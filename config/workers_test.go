package config

import (
	"errors"
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
