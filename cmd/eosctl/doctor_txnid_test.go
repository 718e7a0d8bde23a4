package main

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
)

func TestDoctorWarnsAboutOldTransactionalIDs(t *testing.T) {
	_, addr := newCluster(t, kfake.BrokerConfigs(devConfigs), kfake.SeedTopics(1, "orders"))
	produceCommitted(t, addr, "orders", "orders-worker-0", 1)   // this app, old form
	produceCommitted(t, addr, "orders", "orders-eu-1", 1)       // old form: this app's or another's, no one can tell
	produceCommitted(t, addr, "orders", "orders:worker-1", 1)   // this app, new form
	produceCommitted(t, addr, "orders", "orders-eu:1", 1)       // another app, new form
	produceCommitted(t, addr, "orders", "payments-worker-0", 1) // another app, old form

	res := doctor(t, addr, exitOK, "--config", writeConfig(t, addr, ""))
	f, ok := findingWith(res, statusWarn, "old form app_id-instance_id exist")
	if !ok {
		t.Fatalf("no warning about old transactional ids: %+v", res.Findings)
	}
	if !strings.Contains(f.Detail, "2 transactional id(s)") || !strings.Contains(f.Detail, "orders-eu-1, orders-worker-0.") {
		t.Errorf("want exactly the two old-form ids of app orders named: %s", f.Detail)
	}
	for _, other := range []string{"orders:worker-1", "orders-eu:1", "payments-worker-0"} {
		if strings.Contains(f.Detail, other+",") || strings.Contains(f.Detail, other+".") {
			t.Errorf("%s is named, but it is not an old-form id of app orders: %s", other, f.Detail)
		}
	}
	if !strings.Contains(f.Detail, "orders:worker-0") || !strings.Contains(f.Fix, "stop every instance of the old version") {
		t.Errorf("want the new id and a fix: %+v", f)
	}
}

func TestDoctorFindsNoOldTransactionalIDs(t *testing.T) {
	_, addr := newCluster(t, kfake.BrokerConfigs(devConfigs), kfake.SeedTopics(1, "orders"))
	produceCommitted(t, addr, "orders", "orders:worker-0", 1)
	res := doctor(t, addr, exitOK, "--config", writeConfig(t, addr, ""))
	if _, ok := findingWith(res, statusOK, `no transactional ids of the old form "orders-INSTANCE"`); !ok {
		t.Errorf("want an ok finding: %+v", res.Findings)
	}
}
