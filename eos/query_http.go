package eos

import (
	"encoding/json"
	"errors"
	"net/http"

	"go.uber.org/zap"
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

// QueryHandler serves GET /stores/{store}/keys/{key}, a key's committed
// value in a state store as JSON (see StoreQuery and docs/state.md). Any
// caller that reaches it reads any key, so nothing serves it unless a
// program mounts it itself, on a listener its callers may use; Handler
// and metrics_addr, often open to a whole cluster's scrapers, never do.
func (r *Runner) QueryHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /stores/{store}/keys/{key}", r.serveKey)
	return mux
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
	if err != nil {
		code, ans.Status, ans.Error = keyError(err)
		if code == http.StatusInternalServerError {
			r.log.Warn("answering a state store query failed", zap.String("store", ans.Store), zap.Error(err))
		}
	} else if ans.Status == "" {
		ans.Status = "found"
	}
	if code == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(ans)
}

// keyError is the status code, status and error text that answer err. An
// error that is not a query's status says only that the log has it: its
// detail (an engine's or a broker's words, paths) is not for whoever sent
// the request.
func keyError(err error) (code int, status, text string) {
	switch {
	case errors.Is(err, ErrUnknownStore):
		return http.StatusNotFound, "unknown_store", err.Error()
	case errors.Is(err, ErrRestoring):
		return http.StatusServiceUnavailable, "restoring", err.Error()
	case errors.Is(err, ErrStopped):
		return http.StatusServiceUnavailable, "stopped", err.Error()
	case errors.Is(err, ErrNotOwner):
		return http.StatusMisdirectedRequest, "not_owner", err.Error()
	}
	return http.StatusInternalServerError, "error", "internal error; the instance's log says more"
}
