package main

import (
	"fmt"
	"sort"
	"strings"

	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/internal/runcfg"
)

// maxListedIDs caps how many transactional ids one finding names.
const maxListedIDs = 10

// checkLegacyTxnIDs warns about transactional ids of the old
// app_id-instance_id form that the coordinators still know for the app. A
// new instance does not fence or abort what an old one left open under its
// old id, and with '-' as separator apps whose names share a prefix could
// share an id.
func (e *doctorEnv) checkLegacyTxnIDs(fs *findings) {
	const check = "transactional ids"
	c := e.cfg
	if c.AppID == "" || c.Guarantee != config.ExactlyOnce {
		return
	}
	listed, err := e.adm.ListTransactions(e.ctx, nil, nil)
	if err != nil && len(listed) == 0 {
		fs.warn(check, fmt.Sprintf("cannot list transactional ids (%v), so ids of the old app_id-instance_id form were not looked for", err),
			"run doctor as a principal with Describe on the app's transactional ids, against Kafka 3.0 or later")
		return
	}
	prefix := c.AppID + "-"
	var old []string
	for id := range listed {
		// New ids contain the separator, which no app_id or instance_id
		// can; so an id without it is of the old form.
		if strings.HasPrefix(id, prefix) && !strings.Contains(id, config.TransactionalIDSeparator) {
			old = append(old, id)
		}
	}
	if len(old) == 0 {
		fs.ok(check, "no transactional ids of the old form %q for app %q; this version uses %q", prefix+"INSTANCE", c.AppID, c.AppID+config.TransactionalIDSeparator+"INSTANCE")
		return
	}
	sort.Strings(old)
	names := strings.Join(old[:min(len(old), maxListedIDs)], ", ")
	if len(old) > maxListedIDs {
		names += fmt.Sprintf(" and %d more", len(old)-maxListedIDs)
	}
	fs.warn(check,
		fmt.Sprintf("%d transactional id(s) of the old form app_id-instance_id exist: %s. This version uses %s: a new instance neither fences nor aborts what an old one left open under its old id, and old-form ids of apps such as %q and %q can collide",
			len(old), names, runcfg.TransactionalID(c), c.AppID, c.AppID+"-eu"),
		"stop every instance of the old version before starting the new one (a transaction they left open blocks read_committed consumers until transaction_timeout aborts it); the old ids expire after transactional.id.expiration.ms (default 7 days) unused")
}
