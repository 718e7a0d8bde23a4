package config_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/eosflow/eosflow/config"
)

// Load a small file, let the environment override it, and validate.
func ExampleLoad() {
	dir, _ := os.MkdirTemp("", "eosflow-example")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "app.yaml")
	_ = os.WriteFile(path, []byte(`
brokers: [127.0.0.1:9092]
app_id: orders-enricher
instance_id: worker-0
commit_interval: 200ms
transaction_timeout: 100ms
`), 0o600)

	c, err := config.Load(path)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("app_id:", c.AppID, "instance_id:", c.InstanceID)
	fmt.Println("guarantee:", c.Guarantee, "max_batch_records:", c.MaxBatchRecords)

	err = c.Validate()
	fmt.Println(err)
	var fe *config.FieldError
	if errors.As(err, &fe) {
		fmt.Println("field:", fe.Field, "invalid:", errors.Is(err, config.ErrInvalid))
	}

	c.TransactionTimeout = 0
	os.Setenv("EOS_TRANSACTION_TIMEOUT", "30s")
	defer os.Unsetenv("EOS_TRANSACTION_TIMEOUT")
	c, _ = config.FromEnv(c)
	fmt.Println("after EOS_TRANSACTION_TIMEOUT=30s:", c.TransactionTimeout, c.Validate())
	// Output:
	// app_id: orders-enricher instance_id: worker-0
	// guarantee: exactly-once max_batch_records: 50000
	// config: transaction_timeout "100ms": must be greater than commit_interval (200ms); raise it or lower commit_interval
	// field: transaction_timeout invalid: true
	// after EOS_TRANSACTION_TIMEOUT=30s: 30s <nil>
}
