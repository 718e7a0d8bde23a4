package eos

import (
	"encoding/json"
	"errors"
	"net/http"
)

// keyAnswer is the JSON body of GET /stores/{store}/keys/{key}.
type keyAnswer struct {
	Store     string `json:"store"`
	Key       string `json:"key"`
	Value     []byte `json:"value,omitempty"` // base64, as JSON encodes bytes
	Partition *int32 `json:"partition,omitempty"`
	// Status is "found", "absent", "restoring", "not_owner", "stopped" or
	// "unknown_store"; Error says more when it is not found or absent.
	Status string `json:"status"`
	Error  string `json:"error,omitempty"`
}

// serveKey answers GET /stores/{store}/keys/{key} with the key's committed
// value: 200 when found, 404 when absent (or the store is unknown), 503
// with a Retry-After while the key's partition is restoring or Run is not
// running, and 421 (Misdirected Request) when another instance owns the
// partition or a rebalance is moving it. It neither redirects nor
// proxies: the answer names the partition, and the caller asks its owner.
func (r *Runner) serveKey(w http.ResponseWriter, req *http.Request) {
	ans := keyAnswer{Store: req.PathValue("store"), Key: req.PathValue("key")}
	code := http.StatusOK
	q, err := r.Query(ans.Store)
	if err == nil {
		var loc KeyLocation
		if loc, err = q.Locate(req.Context(), []byte(ans.Key)); err == nil {
			ans.Partition = &loc.Partition
			var found bool
			if ans.Value, found, err = q.Get(req.Context(), []byte(ans.Key)); err == nil && !found {
				code, ans.Status = http.StatusNotFound, "absent"
			}
		}
	}
	switch {
	case err == nil:
		if ans.Status == "" {
			ans.Status = "found"
		}
	case errors.Is(err, ErrUnknownStore):
		code, ans.Status = http.StatusNotFound, "unknown_store"
	case errors.Is(err, ErrRestoring):
		code, ans.Status = http.StatusServiceUnavailable, "restoring"
	case errors.Is(err, ErrStopped):
		code, ans.Status = http.StatusServiceUnavailable, "stopped"
	case errors.Is(err, ErrNotOwner):
		code, ans.Status = http.StatusMisdirectedRequest, "not_owner"
	default:
		code, ans.Status = http.StatusInternalServerError, "error"
	}
	if err != nil {
		ans.Error = err.Error()
	}
	if code == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(ans)
}
