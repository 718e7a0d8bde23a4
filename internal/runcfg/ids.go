package runcfg

import (
	"os"
	"path/filepath"
	"runtime"
	"strconv"

	"github.com/eosflow/eosflow/config"
)

// TransactionalID is the transactional.id of c's instance: AppID + ":" +
// InstanceID, e.g. "orders-eu:1". It is stable across restarts so that the
// broker fences a zombie predecessor, and unique per (AppID, InstanceID) so
// that two applications never fence each other (see
// config.TransactionalIDSeparator).
func TransactionalID(c config.Config) string {
	return c.AppID + config.TransactionalIDSeparator + c.InstanceID
}

// WorkerCount is how many workers c.Workers asks for: GOMAXPROCS for
// config.WorkersAuto, 1 for 0 (unset) or 1, the number otherwise. The
// runtime runs that many sessions in one process.
func WorkerCount(c config.Config) int {
	switch {
	case c.Workers == config.WorkersAuto:
		return runtime.GOMAXPROCS(0)
	case c.Workers < 1:
		return 1
	}
	return int(c.Workers)
}

// WorkerInstanceID is the instance id of worker i under workers > 1:
// instance_id + "_" + i (config.WorkerSeparator), e.g. pod-3_0, pod-3_1.
// It is stable across restarts as long as instance_id and workers stay the
// same, so each worker fences its own previous incarnation and keeps its
// static group membership.
func WorkerInstanceID(c config.Config, i int) string {
	return c.InstanceID + config.WorkerSeparator + strconv.Itoa(i)
}

// InstanceIDs are the group.instance.ids the sessions of c's process use:
// InstanceID under one worker, otherwise WorkerInstanceID of each worker.
// They are the members to look for in the group, or to remove from it
// (eosctl group leave) when the process is gone for good.
func InstanceIDs(c config.Config) []string {
	n := WorkerCount(c)
	if n == 1 {
		return []string{c.InstanceID}
	}
	ids := make([]string, n)
	for i := range ids {
		ids[i] = WorkerInstanceID(c, i)
	}
	return ids
}

// ForWorker is the configuration worker i of c's instance runs with:
// InstanceID is WorkerInstanceID(c, i) and Workers 1, so its
// transactional.id, group.instance.id and StateDir are its own and no two
// workers fence each other or share a store; MaxMemory is its share of a
// set max_memory. config.Validate refuses it, as it refuses the separator
// in any instance_id a user sets: the runtime validates c, not its
// workers' configurations.
func ForWorker(c config.Config, i int) config.Config {
	n := WorkerCount(c)
	c.InstanceID = WorkerInstanceID(c, i)
	c.MaxMemory /= config.ByteSize(n) // its share; unset stays unset
	c.Workers = 1
	return c
}

// StateDir is where the state stores of c's instance live:
// <state_dir>/<app_id>/<instance_id>, with state_dir defaulting to
// <temp dir>/eosflow, so that two applications or two instances sharing a
// state_dir never share a store.
func StateDir(c config.Config) string {
	base := c.StateDir
	if base == "" {
		base = filepath.Join(os.TempDir(), "eosflow")
	}
	return filepath.Join(base, c.AppID, c.InstanceID)
}

// Consumer reports whether c asks for KIP-848's consumer protocol; any
// other valid group_protocol is the classic one.
func Consumer(c config.Config) bool {
	return c.GroupProtocol == config.GroupProtocolConsumer
}
