package state

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// StoreInfo is one persistent store found on disk by Inspect: which store
// of which task it is, and the changelog offset it applied, so an operator
// can tell how far a restore would have to read without starting the
// pipeline.
type StoreInfo struct {
	Name string // the store's name in the topology
	Task Task   // the input partition that owns it
	Dir  string // its pebble directory
	// Offset is the last changelog offset the store applied (NoOffset if
	// none); valid only when Err is nil.
	Offset int64
	// Err says why the offset could not be read: ErrInUse when a running
	// instance has the store open, else what failed.
	Err error
}

// Inspect lists the pebble stores under dir, the state directory of one
// instance (config.Config.StateDirFor: <state_dir>/<app_id>/<instance_id>),
// laid out as Pebble lays them out (<topic>-<partition>/<store>), sorted
// by task then name. Each store is opened read-only just long enough to
// read its applied offset; a store that a running instance holds is
// reported with ErrInUse in its Err rather than failing the whole call.
// A dir that does not exist holds no stores. Directories that are not
// pebble databases are skipped.
func Inspect(dir string) ([]StoreInfo, error) {
	tasks, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("state: reading state directory %s: %w", dir, err)
	}
	var out []StoreInfo
	for _, td := range tasks {
		task, ok := parseTaskDir(td.Name())
		if !ok || !td.IsDir() {
			continue
		}
		stores, err := os.ReadDir(filepath.Join(dir, td.Name()))
		if err != nil {
			return nil, fmt.Errorf("state: reading task directory %s: %w", filepath.Join(dir, td.Name()), err)
		}
		for _, sd := range stores {
			if !sd.IsDir() || validName("store name", sd.Name()) != nil {
				continue
			}
			path := filepath.Join(dir, td.Name(), sd.Name())
			if desc, err := pebble.Peek(path, vfs.Default); err != nil || !desc.Exists {
				continue
			}
			info := StoreInfo{Name: sd.Name(), Task: task, Dir: path, Offset: NoOffset}
			info.Offset, info.Err = appliedOffset(path)
			out = append(out, info)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Task.Topic != b.Task.Topic {
			return a.Task.Topic < b.Task.Topic
		}
		if a.Task.Partition != b.Task.Partition {
			return a.Task.Partition < b.Task.Partition
		}
		return a.Name < b.Name
	})
	return out, nil
}

// parseTaskDir reads a task directory's name, <topic>-<partition>; the
// topic may itself contain '-', so the partition follows the last one.
func parseTaskDir(name string) (Task, bool) {
	i := strings.LastIndexByte(name, '-')
	if i <= 0 {
		return Task{}, false
	}
	p, err := strconv.ParseInt(name[i+1:], 10, 32)
	if err != nil || p < 0 || validName("topic", name[:i]) != nil {
		return Task{}, false
	}
	return Task{Topic: name[:i], Partition: int32(p)}, true
}

// appliedOffset opens the pebble database at path read-only and reads the
// offset the engine stored with its data.
func appliedOffset(path string) (int64, error) {
	db, err := pebble.Open(path, &pebble.Options{ReadOnly: true, ErrorIfNotExists: true, Logger: quiet{}})
	if err != nil {
		if locked(err) {
			return NoOffset, fmt.Errorf("%w: %s", ErrInUse, path)
		}
		return NoOffset, err
	}
	defer db.Close()
	return (&pebbleBackend{db: db}).offset()
}

// The errors fcntl gives when another process holds a lock.
var errLockBusy, errLockDenied error = syscall.EAGAIN, syscall.EACCES

// locked reports whether err is pebble's failure to take the directory
// lock: another process holds it (EAGAIN or EACCES from fcntl, depending
// on the system), or this one does.
func locked(err error) bool {
	return errors.Is(err, errLockBusy) || errors.Is(err, errLockDenied) ||
		strings.Contains(err.Error(), "lock held by current process")
}
