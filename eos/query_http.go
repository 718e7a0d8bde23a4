package eos

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"

	"go.uber.org/zap"
)

// keyAnswer is the JSON body of GET /stores/{store}/keys/{key}.
type keyAnswer struct {
	Store string `json:"store"`
	// Key is the key as text; KeyBase64 is its bytes exactly, for a key
	// that is not UTF-8 (JSON would replace its invalid bytes).
	Key       string `json:"key"`
	KeyBase64 []byte `json:"key_base64"`
	Value     []byte `json:"value,omitempty"` // base64, as JSON encodes bytes
	Partition *int32 `json:"partition,omitempty"`
	// Instance is the instance_id of the instance holding the key's
	// partition, as the group was last described (KeyLocation.Instance).
	Instance string `json:"instance,omitempty"`
	// Status is "found", "absent", "restoring", "not_owner", "stopped",
	// "unavailable" or "unknown_store"; Error says more when it is not
	// found or absent.
	Status string `json:"status"`
	Error  string `json:"error,omitempty"`
}

// QueryPeers gives QueryHandler the base URL under which another
// instance's QueryHandler answers (e.g. "http://pod-2:8080"), by its
// instance_id; ok false when it has none. With it, a request for a key
// another instance holds is redirected there (307); without it, or for
// an instance it does not map, the answer is 421 naming that instance.
func QueryPeers(peer func(instanceID string) (baseURL string, ok bool)) Option {
	return optFunc(func(r *Runner) { r.queryPeers = peer })
}

// hopParam marks a redirected query: its target answers it itself, even
// when it does not hold the key either, so that two instances whose
// views of the group differ never send a caller back and forth.
const hopParam = "hop"

// QueryHandler serves GET /stores/{store}/keys/{key}, a key's committed
// value in a state store as JSON (see StoreQuery and docs/state.md); the
// key is the path segment, URL-escaped, with a key "." or ".." sent as
// %2E or %2E%2E (see PathSegment). Any other request under /stores/ is
// answered with a JSON error naming the path and method expected. Any
// caller that reaches it reads any key, so nothing serves it unless a
// program mounts it itself, on a listener its callers may use, or sets
// metrics_serve_queries to serve it on metrics_addr beside /metrics.
func (r *Runner) QueryHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /stores/{store}/keys/{key}", r.serveKey)
	mux.HandleFunc("/stores/", serveWrongRoute)
	return mux
}

// PathSegment escapes s as one segment of a URL path, as QueryHandler
// expects a store name or key: url.PathEscape, and "." and ".." as %2E
// and %2E%2E, which url.PathEscape leaves as they are and HTTP clients
// and servers would take as the current and parent directory.
func PathSegment(s string) string {
	switch s {
	case ".":
		return "%2E"
	case "..":
		return "%2E%2E"
	}
	return url.PathEscape(s)
}

// routeError is the JSON body of a request QueryHandler has no route for.
type routeError struct {
	Status string `json:"status"` // "not_found" or "method_not_allowed"
	Error  string `json:"error"`
}

// expectedRoute says what QueryHandler answers.
const expectedRoute = "QueryHandler answers GET /stores/{store}/keys/{key}, the store name and key each one URL-escaped path segment (a key \".\" or \"..\" as %2E or %2E%2E)"

// serveWrongRoute answers a request under /stores/ that is not a GET of
// a key: 405 for a key's path with another method, else 404, in JSON
// like every other answer, naming the route there is.
func serveWrongRoute(w http.ResponseWriter, req *http.Request) {
	code, ans := http.StatusNotFound, routeError{Status: "not_found", Error: "no such path: " + req.URL.EscapedPath() + "; " + expectedRoute}
	if parts := strings.Split(strings.TrimPrefix(req.URL.EscapedPath(), "/stores/"), "/"); len(parts) == 3 && parts[1] == "keys" && parts[0] != "" && parts[2] != "" {
		code, ans = http.StatusMethodNotAllowed, routeError{Status: "method_not_allowed", Error: "method " + req.Method + " not allowed; " + expectedRoute}
		w.Header().Set("Allow", "GET, HEAD")
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(ans)
}

// serveKey answers GET /stores/{store}/keys/{key} with the key's committed
// value: 200 when found, 404 when absent (or the store is unknown), 503
// with a Retry-After while the key's partition is restoring, Run is not
// running or the brokers do not answer, and, when another instance holds
// the partition or a rebalance is moving it, 307 to the holder that
// QueryPeers maps (once: see hopParam), else 421 (Misdirected Request)
// naming the holder when the group said which.
func (r *Runner) serveKey(w http.ResponseWriter, req *http.Request) {
	key := []byte(req.PathValue("key"))
	ans := keyAnswer{Store: req.PathValue("store"), Key: string(key), KeyBase64: key}
	code := http.StatusOK
	q, err := r.Query(ans.Store)
	var loc KeyLocation
	if err == nil {
		if loc, err = q.Locate(req.Context(), key); err == nil {
			ans.Partition, ans.Instance = &loc.Partition, loc.Instance
			var found bool
			if ans.Value, found, err = q.getAt(loc, key); err == nil && !found {
				code, ans.Status = http.StatusNotFound, "absent"
			}
		}
	}
	if err != nil && req.Context().Err() != nil {
		return // the caller went away: nobody to answer, nothing to log
	}
	if err != nil {
		code, ans.Status, ans.Error = keyError(err)
		if code == http.StatusInternalServerError {
			r.log.Warn("answering a state store query failed", zap.String("store", ans.Store), zap.Error(err))
		}
		if target, ok := r.peerURL(req, ans.Store, key, loc, err); ok {
			code = http.StatusTemporaryRedirect
			w.Header().Set("Location", target)
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

// peerURL is where to redirect a query of key that err says is not
// owned here: the URL of the same request at the instance loc names, when
// QueryPeers maps it and the request was not redirected already.
func (r *Runner) peerURL(req *http.Request, store string, key []byte, loc KeyLocation, err error) (string, bool) {
	if r.queryPeers == nil || !errors.Is(err, ErrNotOwner) || loc.Instance == "" ||
		loc.Instance == r.cfg.InstanceID || req.URL.Query().Has(hopParam) {
		return "", false
	}
	base, ok := r.queryPeers(loc.Instance)
	if !ok {
		return "", false
	}
	return strings.TrimSuffix(base, "/") + "/stores/" + PathSegment(store) + "/keys/" +
		PathSegment(string(key)) + "?" + hopParam + "=1", true
}

// keyError is the status code, status and error text that answer err. An
// error that is not a query's status says only that the log has it: its
// detail (an engine's or a broker's words, paths) is not for whoever sent
// the request.
func keyError(err error) (code int, status, text string) {
	var unavailable *unavailableError
	switch {
	case errors.Is(err, ErrUnknownStore):
		return http.StatusNotFound, "unknown_store", err.Error()
	case errors.Is(err, ErrRestoring):
		return http.StatusServiceUnavailable, "restoring", err.Error()
	case errors.Is(err, ErrStopped):
		return http.StatusServiceUnavailable, "stopped", err.Error()
	case errors.Is(err, ErrNotOwner):
		return http.StatusMisdirectedRequest, "not_owner", err.Error()
	case errors.As(err, &unavailable):
		return http.StatusServiceUnavailable, "unavailable", "the brokers did not say the store's partition count; retry shortly"
	}
	return http.StatusInternalServerError, "error", "internal error; the instance's log says more"
}
