package config

import (
	"errors"
	"strings"
	"testing"

	"go.uber.org/zap/zapcore"
	"go.yaml.in/yaml/v3"
)

func TestParseByteSize(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want ByteSize
	}{
		{"134217728", 128 * MiB},
		{"128MiB", 128 * MiB},
		{"128 MiB", 128 * MiB},
		{"128mib", 128 * MiB},
		{"128Mi", 128 * MiB},
		{"1GiB", GiB},
		{"1.5GiB", 3 * GiB / 2},
		{"64KiB", 64 * KiB},
		{"200MB", 200_000_000},
		{"200M", 200_000_000},
		{"2G", 2_000_000_000},
		{"1TiB", TiB},
		{"512B", 512},
		{" 16MiB ", 16 * MiB},
	} {
		got, err := ParseByteSize(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("ParseByteSize(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
		}
	}
	for _, in := range []string{"", "MiB", "12XB", "-1MiB", "1e3", "ten", "1..2MiB", "9999999TiB", "NaN"} {
		if got, err := ParseByteSize(in); err == nil {
			t.Errorf("ParseByteSize(%q) = %d; want an error", in, got)
		}
	}
}

func TestByteSizeStringReadsBack(t *testing.T) {
	for _, b := range []ByteSize{0, 1, 512, KiB, 128 * MiB, 3 * GiB / 2, 200_000_000, TiB, 1000, 1234567} {
		back, err := ParseByteSize(b.String())
		if err != nil || back != b {
			t.Errorf("%d printed %q reads back as %d, %v", int64(b), b.String(), back, err)
		}
	}
	if got := (128 * MiB).String(); got != "128MiB" {
		t.Errorf("128 MiB printed %q, want 128MiB", got)
	}
	if got := ByteSize(200_000_000).String(); got != "200MB" {
		t.Errorf("200,000,000 printed %q, want 200MB", got)
	}
}

func TestLoadMaxMemory(t *testing.T) {
	for _, tt := range []struct {
		yaml, env string
		want      ByteSize
	}{
		{"", "", 0},
		{"max_memory: 256MiB\n", "", 256 * MiB},
		{"max_memory: 1GiB\n", "64MiB", 64 * MiB},
		{"max_memory: 268435456\n", "", 256 * MiB},
		{"", "512MB", 512_000_000},
	} {
		clearEnv(t)
		t.Setenv("EOS_MAX_MEMORY", tt.env)
		got, err := Load(writeFile(t, "app.yaml", tt.yaml))
		if err != nil {
			t.Fatalf("yaml %q env %q: %v", tt.yaml, tt.env, err)
		}
		if got.MaxMemory != tt.want {
			t.Errorf("yaml %q env %q: max_memory %s, want %s", tt.yaml, tt.env, got.MaxMemory, tt.want)
		}
	}

	clearEnv(t)
	_, err := Load(writeFile(t, "app.yaml", "max_memory: lots\n"))
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Field != "max_memory" || !strings.Contains(err.Error(), "line 1") || !strings.Contains(err.Error(), "128MiB") {
		t.Fatalf("max_memory: lots = %v; want a *FieldError naming max_memory, its line and an example size", err)
	}
	t.Setenv("EOS_MAX_MEMORY", "128 megs")
	_, err = Load("")
	if !errors.As(err, &fe) || fe.Field != "EOS_MAX_MEMORY" || !strings.Contains(err.Error(), "MiB") {
		t.Fatalf("EOS_MAX_MEMORY=128 megs = %v; want a *FieldError naming EOS_MAX_MEMORY and the form", err)
	}
}

func TestValidateMaxMemory(t *testing.T) {
	tests := []struct {
		name    string
		change  func(*Config)
		mention []string
	}{
		{"negative", func(c *Config) { c.MaxMemory = -MiB }, []string{"negative", "128MiB"}},
		{"below one max message", func(c *Config) { c.MaxMemory = MiB }, []string{"at least 16MiB", "message.max.bytes"}},
		{"just below the minimum", func(c *Config) { c.MaxMemory = MinMaxMemory - 1 }, []string{"at least 16MiB"}},
		{"too little per worker", func(c *Config) {
			c.MaxMemory = 40 * MiB
			c.Workers = 4
		}, []string{"workers: 4", "at least 64MiB", "lower workers"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := valid()
			tt.change(&c)
			err := c.Validate()
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Field != "max_memory" || !errors.Is(err, ErrInvalid) {
				t.Fatalf("Validate = %v; want a *FieldError for max_memory", err)
			}
			for _, m := range tt.mention {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("%q does not mention %q", err, m)
				}
			}
			if strings.Count(err.Error(), "\n") != 0 {
				t.Errorf("one change produced several errors: %q", err)
			}
		})
	}
	for _, tt := range []struct {
		m ByteSize
		w Workers
	}{{0, 1}, {0, MaxWorkers}, {MinMaxMemory, 1}, {64 * MiB, 4}, {TiB, 1}, {0, WorkersAuto}} {
		c := valid()
		c.MaxMemory, c.Workers = tt.m, tt.w
		if err := c.Validate(); err != nil {
			t.Errorf("max_memory %s, workers %s: %v", tt.m, tt.w, err)
		}
	}
}

func TestMaxMemoryPrintedAsWritten(t *testing.T) {
	c := valid()
	if strings.Contains(c.String(), "max_memory") {
		t.Errorf("unset max_memory printed: %s", c)
	}
	c.MaxMemory = 256 * MiB
	if !strings.Contains(c.String(), "max_memory=256MiB") {
		t.Errorf("String() = %s, want max_memory=256MiB", c)
	}
	enc := zapcore.NewMapObjectEncoder()
	_ = c.MarshalLogObject(enc)
	if enc.Fields["max_memory"] != "256MiB" {
		t.Errorf("logged max_memory = %#v, want 256MiB", enc.Fields["max_memory"])
	}
	out, err := yaml.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	clearEnv(t)
	back, err := Load(writeFile(t, "app.yaml", string(out)))
	if err != nil || back.MaxMemory != 256*MiB {
		t.Fatalf("round trip through YAML: max_memory %s, err %v\n%s", back.MaxMemory, err, out)
	}
}
