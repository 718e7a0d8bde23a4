package eos

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/internal/kafkautil"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
)

// preflight fails fast on what no retry fixes: unreachable brokers and
// missing topics. It reads the output topics' limits, and keeps its
// client for the admin requests of the run (stall checks, settling lost
// commit answers, leaving the group).
func (r *Runner) preflight(ctx context.Context) error {
	// The user's options (a dialer, hooks) apply to the admin requests
	// of the run too.
	opts, err := kafkautil.ConnOptions(r.cfg, r.extra...)
	if err != nil {
		return err
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return err
	}
	r.admin = cl
	r.health.admin.Store(cl)
	pctx, cancel := context.WithTimeout(ctx, r.cfg.ConnectTimeout)
	defer cancel()
	if err := cl.Ping(pctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		if aerr := r.authenticationError(err); aerr != nil {
			return aerr
		}
		return fmt.Errorf("%w: no answer from %s within %s (%v); check brokers (EOS_BROKERS) and that Kafka is running",
			ErrUnreachable, strings.Join(r.cfg.Brokers, ","), r.cfg.ConnectTimeout, err)
	}
	if err := r.checkGroupProtocol(pctx, cl); err != nil {
		return err
	}
	topics := append(r.top.InputTopics(), r.top.OutputTopics()...)
	details, err := kadm.NewClient(cl).ListTopics(pctx, topics...)
	if isFatal(err) {
		return r.authError(err, refusedTopics(pctx, cl, topics)...)
	}
	if err != nil {
		return r.unreachable(fmt.Errorf("eos: listing topics on %s: %w", strings.Join(r.cfg.Brokers, ","), err))
	}
	var missing []string
	for _, t := range topics {
		d, ok := details[t]
		switch {
		case !ok || errors.Is(d.Err, kerr.UnknownTopicOrPartition):
			missing = append(missing, t)
		case isFatal(d.Err):
			return r.authError(d.Err, t)
		}
	}
	if len(missing) > 0 && r.create != nil {
		if err := r.createTopics(pctx, kadm.NewClient(cl), missing); err != nil {
			return err
		}
		missing = nil
	}
	if len(missing) > 0 {
		return &MissingTopicsError{Topics: missing, Brokers: r.cfg.Brokers}
	}
	r.loadLimits(pctx, kadm.NewClient(cl), r.top.OutputTopics())
	parts := map[string]int32{}
	for _, t := range r.top.InputTopics() {
		if d, ok := details[t]; ok && d.Err == nil {
			parts[t] = int32(len(d.Partitions))
		} else if r.create != nil {
			parts[t] = r.create.partitions
		}
	}
	if err := r.repartitions(pctx, kadm.NewClient(cl), parts); err != nil {
		return err
	}
	if err := r.checkCoPartitioned(parts); err != nil {
		return err
	}
	if err := r.changelogs(pctx, kadm.NewClient(cl), parts); err != nil {
		return err
	}
	if r.cfg.Guarantee != config.ExactlyOnce {
		return nil
	}
	return r.ensureMirror(pctx, kadm.NewClient(cl))
}

// authenticationError says which credential the brokers refused (the SASL
// login, the client certificate or its absence), or that their certificate
// is not trusted, or returns nil for other errors: each fails the same way
// on every attempt, and "unreachable" would send the reader to the network
// instead.
func (r *Runner) authenticationError(err error) error {
	brokers := strings.Join(r.cfg.Brokers, ",")
	switch {
	case kafkautil.IsSASLFailure(err):
		return fmt.Errorf("%w: the brokers at %s refused SASL %s login of user %q (%v); check sasl.username and sasl.password (EOS_SASL_USERNAME, EOS_SASL_PASSWORD) and that the user exists for this mechanism",
			ErrAuthentication, brokers, r.cfg.SASL.Mechanism, r.cfg.SASL.Username, err)
	case kafkautil.IsTLSFailure(err):
		ca := "the system's CA pool"
		if r.cfg.TLS.CAFile != "" {
			ca = "tls.ca_file " + r.cfg.TLS.CAFile
		}
		return fmt.Errorf("%w: the certificate of the brokers at %s is not trusted by %s (%v); set tls.ca_file (EOS_TLS_CA_FILE) to the CA that signed it, and connect by a name the certificate lists",
			ErrAuthentication, brokers, ca, err)
	case kafkautil.IsClientCertRefused(err) && r.cfg.TLS.CertFile == "":
		return fmt.Errorf("%w: the brokers at %s require a client certificate (mutual TLS) and refused the connection without one (%v); set tls.cert_file and tls.key_file (EOS_TLS_CERT_FILE, EOS_TLS_KEY_FILE) to a certificate signed by a CA the brokers trust",
			ErrAuthentication, brokers, err)
	case kafkautil.IsClientCertRefused(err):
		return fmt.Errorf("%w: the brokers at %s refused the client certificate tls.cert_file %s (%v); set tls.cert_file and tls.key_file (EOS_TLS_CERT_FILE, EOS_TLS_KEY_FILE) to a certificate that is valid now and signed by a CA the brokers trust",
			ErrAuthentication, brokers, r.cfg.TLS.CertFile, err)
	}
	return nil
}

// createTopics makes the missing topics as CreateTopics asked. Clients
// that meet a topic before its metadata spreads retry until it has.
func (r *Runner) createTopics(ctx context.Context, adm *kadm.Client, missing []string) error {
	err := kafkautil.RequestTopics(ctx, adm, r.create.partitions, r.create.replication, nil, missing...)
	if isFatal(err) {
		return r.authErrorOp(fmt.Errorf("creating missing topics %v: %w", missing, err), "Create", missing...)
	}
	if err != nil {
		return r.unreachable(fmt.Errorf("eos: creating missing topics %v: %w; create them with `eosctl topic create %s`", missing, err, strings.Join(missing, " ")))
	}
	r.log.Info("created missing topics", zap.Strings("topics", missing),
		zap.Int32("partitions", r.create.partitions), zap.Int16("replication", r.create.replication))
	return nil
}

// unreachable marks err, from a request of the start-up checks, as the
// brokers being unreachable (ErrUnreachable) when no broker answered it
// (a connection failure or a timeout) rather than one refusing it: the
// brokers can go away between the first check and the next.
func (r *Runner) unreachable(err error) error {
	var ke *kerr.Error
	if err == nil || errors.As(err, &ke) {
		return err
	}
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) {
		return fmt.Errorf("%w: %v; check brokers (EOS_BROKERS) and that Kafka is running", ErrUnreachable, err)
	}
	return err
}
