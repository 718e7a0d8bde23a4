package eos

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"
)

// Handler serves /metrics (when metrics are on), /healthz (200 while the
// process answers), /readyz (200 once Run has joined its group and is
// neither restoring, fenced nor stopping; 503 with the reason otherwise),
// for a program that mounts them on its own server, which can outlive
// Run. metrics_addr serves the same handler. It never serves state store
// contents: that is QueryHandler, which a program mounts only where its
// callers may read them (or metrics_serve_queries adds to what
// metrics_addr serves). With workers > 1, /metrics
// serves every worker's series and /readyz is 200 only when every worker
// is ready, and otherwise names the first that is not.
func (r *Runner) Handler() http.Handler {
	mux := http.NewServeMux()
	gatherer := r.workersGatherer()
	if m := r.metrics; m != nil && m.gatherer != nil {
		gatherer = m.gatherer
	}
	if gatherer != nil {
		mux.Handle("/metrics", promhttp.HandlerFor(gatherer, promhttp.HandlerOpts{ErrorLog: zap.NewStdLog(r.log)}))
	} else {
		mux.HandleFunc("/metrics", func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, "metrics are off: set metrics_addr, or pass eos.Metrics a *prometheus.Registry", http.StatusNotFound)
		})
	}
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if r.workers != nil {
			if why := r.workers.notReady(); why != "" {
				http.Error(w, why, http.StatusServiceUnavailable)
				return
			}
			_, _ = fmt.Fprintln(w, r.workers.ready())
			return
		}
		if why := r.health.notReady(r.cfg); why != "" {
			http.Error(w, why, http.StatusServiceUnavailable)
			return
		}
		_, _ = fmt.Fprintf(w, "ready: %d partitions assigned\n", r.health.assignedCount())
	})
	return mux
}

// MetricsAddr returns the address metrics_addr is served on while Run
// runs (with port 0, the port picked), or "" when nothing is served.
func (r *Runner) MetricsAddr() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.httpAddr
}

// metricsHandler is what metrics_addr serves: Handler, and QueryHandler
// under /stores/ when metrics_serve_queries is set.
func (r *Runner) metricsHandler() http.Handler {
	if !r.cfg.MetricsServeQueries {
		return r.Handler()
	}
	mux := http.NewServeMux()
	mux.Handle("/", r.Handler())
	mux.Handle("/stores/", r.QueryHandler())
	return mux
}

// serve starts serving Handler on metrics_addr; stop ends it and waits
// for the serving goroutine.
func (r *Runner) serve() (stop func(), err error) {
	ln, err := net.Listen("tcp", r.cfg.MetricsAddr)
	if err != nil {
		return nil, fmt.Errorf("eos: metrics_addr %q: %w; choose a free port, or leave metrics_addr empty", r.cfg.MetricsAddr, err)
	}
	srv := &http.Server{Handler: r.metricsHandler(), ReadHeaderTimeout: 10 * time.Second, ErrorLog: zap.NewStdLog(r.log)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			r.log.Warn("metrics endpoint stopped", zap.Error(err))
		}
	}()
	r.mu.Lock()
	r.httpAddr = ln.Addr().String()
	r.mu.Unlock()
	r.log.Info("serving /metrics, /healthz and /readyz", zap.String("addr", ln.Addr().String()))
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			_ = srv.Close()
		}
		<-done
		r.mu.Lock()
		r.httpAddr = ""
		r.mu.Unlock()
	}, nil
}
