package config

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// clearEnv unsets every EOS_* variable this package reads (an empty value
// counts as unset), so the developer's environment cannot leak into a test.
func clearEnv(t *testing.T) {
	t.Helper()
	c := Default()
	walk(reflect.ValueOf(&c).Elem(), "", func(f field) { t.Setenv(f.env, "") })
}

// writeFile writes content to a file in a fresh temporary directory.
func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// valid returns a Config that passes Validate, for tests to break one field.
func valid() Config {
	c := Default()
	c.Brokers = []string{"127.0.0.1:9092"}
	c.AppID = "orders"
	c.InstanceID = "worker-0"
	return c
}
