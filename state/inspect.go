package state

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Persistent is an Engine whose stores outlive the process, each in its
// own directory StoreDir(dir, name, task) under the state directory, so
// that Inspect can list them without starting the pipeline.
type Persistent interface {
	Engine
	// AppliedOffset reads the changelog offset that the store at path
	// last applied (NoOffset if none) without taking the store from an
	// instance that has it open: the error wraps ErrInUse if one does.
	// ok is false when path holds no store of this engine.
	AppliedOffset(path string) (offset int64, ok bool, err error)
}

// StoreDir is the directory of store name of task under the state
// directory dir, <dir>/<topic>-<partition>/<name>: where a Persistent
// engine keeps it, and where Inspect looks.
func StoreDir(dir, name string, task Task) string {
	return filepath.Join(dir, task.dirName(), name)
}

// StoreInfo is one persistent store found on disk by Inspect: which store
// of which task it is, and the changelog offset it applied, so an operator
// can tell how far a restore would have to read without starting the
// pipeline.
type StoreInfo struct {
	Name string // the store's name in the topology
	Task Task   // the input partition that owns it
	Dir  string // its directory (StoreDir)
	// Offset is the last changelog offset the store applied (NoOffset if
	// none); valid only when Err is nil.
	Offset int64
	// Err says why the offset could not be read: ErrInUse when a running
	// instance has the store open, else what failed.
	Err error
}

// Inspect lists the stores of engine e under dir, the state directory of
// one instance (<state_dir>/<app_id>/<instance_id>), laid out as StoreDir
// lays them out, sorted by task then name. A store that a running instance
// holds is reported with ErrInUse in its Err rather than failing the whole
// call. A dir that does not exist holds no stores. Directories that are
// not stores of e are skipped.
func Inspect(e Persistent, dir string) ([]StoreInfo, error) {
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
			info := StoreInfo{Name: sd.Name(), Task: task, Dir: StoreDir(dir, sd.Name(), task)}
			if info.Offset, ok, info.Err = e.AppliedOffset(info.Dir); ok {
				out = append(out, info)
			}
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
