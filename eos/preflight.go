package eos

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/internal/engine"
	"github.com/eosflow/eosflow/internal/kafkautil"
	"github.com/eosflow/eosflow/topology"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
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
	pc := &preflightCheck{cfg: r.cfg, contract: r.contract, log: r.log, authz: r.authz, top: r.top, proc: r.proc, inputs: r.inputs,
		create: r.create, purgeEvery: r.purge.every, outputs: r.outputs, changelogs: r.changelogs}
	r.mirror, err = pc.run(ctx, cl)
	return err
}

// preflightCheck is the start-up check of what the app needs of the
// cluster: brokers that answer and accept its credentials, the group
// protocol it asks for, its topics (made where it may make them: missing
// ones when CreateTopics asks, and always its repartition topics,
// changelogs and offsets mirror), and grants to use them.
type preflightCheck struct {
	cfg        config.Config
	contract   contract
	log        *zap.Logger
	authz      *authz
	top        *topology.Topology
	proc       *engine.Engine
	inputs     []string      // the topics consumed: the sources' and the repartition topics
	create     *topicSpec    // CreateTopics, if given
	purgeEvery time.Duration // PurgeInterval: whether repartition topics may keep retention
	outputs    *outputTopics
	changelogs *changelogReader
}

// run checks the cluster through cl, and returns the offsets mirror under
// exactly-once (else nil). No broker answering is an error at once; a
// check that found some broker answering but then ran out of time (a
// broker cut off or paused while the others answer) is repeated, logged,
// until recovery_timeout, as the run would for a broker lost later.
func (pc *preflightCheck) run(ctx context.Context, cl *kgo.Client) (*offsetsMirror, error) {
	var until time.Time
	for attempt := 1; ; attempt++ {
		m, answered, err := pc.check(ctx, cl)
		if ctx.Err() != nil {
			return nil, nil
		}
		if answered && until.IsZero() {
			until = time.Now().Add(pc.cfg.RecoveryTimeout)
		}
		if err == nil || !errors.Is(err, ErrUnreachable) || until.IsZero() {
			return m, err
		}
		if time.Now().After(until) {
			return nil, fmt.Errorf("%w; some broker answered, but the start-up check did not complete within recovery_timeout %s: see which brokers answer with `eosctl doctor --brokers %s`",
				err, pc.cfg.RecoveryTimeout, strings.Join(pc.cfg.Brokers, ","))
		}
		pc.log.Warn("start-up check: a broker did not answer while another did; checking again",
			zap.Int("attempt", attempt), zap.Error(err), zap.Time("gives_up_at", until))
		select {
		case <-ctx.Done():
			return nil, nil
		case <-time.After(time.Second):
		}
	}
}

// check is one pass of the start-up check, within connect_timeout;
// answered reports whether a seed broker and one of the brokers it
// advertises answered, so that a later failure is a broker lost, not a
// broker never reached.
func (pc *preflightCheck) check(ctx context.Context, cl *kgo.Client) (m *offsetsMirror, answered bool, err error) {
	pctx, cancel := context.WithTimeout(ctx, pc.cfg.ConnectTimeout)
	defer cancel()
	if err := pc.reach(pctx, cl); err != nil {
		if ctx.Err() != nil {
			return nil, false, nil
		}
		return nil, false, err
	}
	m, err = pc.checkTopics(pctx, cl)
	return m, true, err
}

// reach pings the seed brokers, then the brokers they advertise, each
// set all at once; an authentication failure of any one is reported as
// such.
func (pc *preflightCheck) reach(ctx context.Context, cl *kgo.Client) error {
	brokers := strings.Join(pc.cfg.Brokers, ",")
	errs := pingSeeds(ctx, cl, pc.cfg.Brokers)
	if errs == nil {
		if _, errs = pingFirst(ctx, cl.DiscoveredBrokers()); errs == nil {
			return nil
		}
		if aerr := pc.authFailure(errs); aerr != nil {
			return aerr
		}
		return fmt.Errorf("%w: a seed broker of %s answered, but none of the brokers it advertises did within %s (%v); check the brokers' advertised.listeners: this client must reach them",
			ErrUnreachable, brokers, pc.cfg.ConnectTimeout, errors.Join(errs...))
	}
	if aerr := pc.authFailure(errs); aerr != nil {
		return aerr
	}
	return fmt.Errorf("%w: no answer from %s within %s (%v); check brokers (EOS_BROKERS) and that Kafka is running",
		ErrUnreachable, brokers, pc.cfg.ConnectTimeout, errors.Join(errs...))
}

// authFailure is the first of errs that is an authentication failure, as
// authenticationError words it; nil if none is.
func (pc *preflightCheck) authFailure(errs []error) error {
	for _, err := range errs {
		if aerr := authenticationError(pc.cfg, err); aerr != nil {
			return aerr
		}
	}
	return nil
}

// checkTopics checks the group protocol, the topics and their grants.
func (pc *preflightCheck) checkTopics(pctx context.Context, cl *kgo.Client) (*offsetsMirror, error) {
	if err := pc.checkGroupProtocol(pctx, cl); err != nil {
		return nil, err
	}
	adm := kadm.NewClient(cl)
	parts, err := pc.userTopics(pctx, cl)
	if err != nil {
		return nil, err
	}
	pc.outputs.loadLimits(pctx, adm, pc.top.OutputTopics())
	if err := pc.repartitions(pctx, adm, parts); err != nil {
		return nil, err
	}
	if err := pc.checkCoPartitioned(parts); err != nil {
		return nil, err
	}
	if err := pc.changelogs.ensureTopics(pctx, adm, parts); err != nil {
		return nil, err
	}
	if !pc.contract.atomic {
		return nil, nil
	}
	return openMirror(pctx, adm, pc.cfg.AppID, pc.inputs, pc.authz, pc.log)
}

// pingSeeds asks every seed broker at once for metadata: franz-go's Ping
// asks them in turn, so a seed that is paused, or whose packets are
// dropped, would use up the whole connect_timeout while the others could
// answer. While the client knows no broker yet, the first seed to answer
// is moved to the front of its seeds and asked again through Ping, which
// teaches the client the cluster's brokers. It returns nil once one
// answered, else every seed's error.
func pingSeeds(ctx context.Context, cl *kgo.Client, addrs []string) []error {
	i, errs := pingFirst(ctx, cl.SeedBrokers())
	if errs != nil || len(cl.DiscoveredBrokers()) > 0 {
		return errs
	}
	if i > 0 && i < len(addrs) {
		first := append([]string{addrs[i]}, slices.Delete(slices.Clone(addrs), i, i+1)...)
		if err := cl.UpdateSeedBrokers(first...); err != nil {
			return []error{err}
		}
	}
	if err := cl.Ping(ctx); err != nil {
		return []error{err}
	}
	return nil
}

// pingFirst asks every broker of bs at once for metadata (of no topic)
// and returns the index of the first to answer, or every error (one
// saying there is none when bs is empty).
func pingFirst(ctx context.Context, bs []*kgo.Broker) (int, []error) {
	if len(bs) == 0 {
		return -1, []error{errors.New("no broker to ask")}
	}
	type answer struct {
		i   int
		err error
	}
	answers := make(chan answer, len(bs))
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for i, b := range bs {
		go func() {
			req := kmsg.NewPtrMetadataRequest()
			req.Topics = []kmsg.MetadataRequestTopic{}
			_, err := b.Request(pctx, req)
			answers <- answer{i, err}
		}()
	}
	var errs []error
	for range bs {
		a := <-answers
		if a.err == nil {
			return a.i, nil
		}
		errs = append(errs, a.err)
	}
	return -1, errs
}

// userTopics checks that the inputs and static outputs exist and may be
// described, creating missing ones when CreateTopics asks, and returns the
// inputs' partition counts.
func (pc *preflightCheck) userTopics(ctx context.Context, cl *kgo.Client) (map[string]int32, error) {
	topics := append(pc.top.InputTopics(), pc.top.OutputTopics()...)
	details, err := kadm.NewClient(cl).ListTopics(ctx, topics...)
	if isFatal(err) {
		return nil, pc.authz.err(err, refusedTopics(ctx, cl, topics)...)
	}
	if err != nil {
		return nil, unreachable(fmt.Errorf("eos: listing topics on %s: %w", strings.Join(pc.cfg.Brokers, ","), err))
	}
	var missing []string
	for _, t := range topics {
		d, ok := details[t]
		switch {
		case !ok || errors.Is(d.Err, kerr.UnknownTopicOrPartition):
			missing = append(missing, t)
		case isFatal(d.Err):
			return nil, pc.authz.err(d.Err, t)
		}
	}
	if len(missing) > 0 && pc.create != nil {
		if err := pc.createTopics(ctx, kadm.NewClient(cl), missing); err != nil {
			return nil, err
		}
		missing = nil
	}
	if len(missing) > 0 {
		return nil, &MissingTopicsError{Topics: missing, Brokers: pc.cfg.Brokers}
	}
	parts := map[string]int32{}
	for _, t := range pc.top.InputTopics() {
		if d, ok := details[t]; ok && d.Err == nil {
			parts[t] = int32(len(d.Partitions))
		} else if pc.create != nil {
			parts[t] = pc.create.partitions
		}
	}
	return parts, nil
}

// authenticationError says which credential the brokers refused (the SASL
// login, the client certificate or its absence), or that their certificate
// is not trusted, or returns nil for other errors: each fails the same way
// on every attempt, and "unreachable" would send the reader to the network
// instead.
func authenticationError(cfg config.Config, err error) error {
	brokers := strings.Join(cfg.Brokers, ",")
	switch {
	case kafkautil.IsSASLFailure(err):
		return fmt.Errorf("%w: the brokers at %s refused SASL %s login of user %q (%v); check sasl.username and sasl.password (EOS_SASL_USERNAME, EOS_SASL_PASSWORD) and that the user exists for this mechanism",
			ErrAuthentication, brokers, cfg.SASL.Mechanism, cfg.SASL.Username, err)
	case kafkautil.IsTLSFailure(err):
		ca := "the system's CA pool"
		if cfg.TLS.CAFile != "" {
			ca = "tls.ca_file " + cfg.TLS.CAFile
		}
		return fmt.Errorf("%w: the certificate of the brokers at %s is not trusted by %s (%v); set tls.ca_file (EOS_TLS_CA_FILE) to the CA that signed it, and connect by a name the certificate lists",
			ErrAuthentication, brokers, ca, err)
	case kafkautil.IsClientCertRefused(err) && cfg.TLS.CertFile == "":
		return fmt.Errorf("%w: the brokers at %s require a client certificate (mutual TLS) and refused the connection without one (%v); set tls.cert_file and tls.key_file (EOS_TLS_CERT_FILE, EOS_TLS_KEY_FILE) to a certificate signed by a CA the brokers trust",
			ErrAuthentication, brokers, err)
	case kafkautil.IsClientCertRefused(err):
		return fmt.Errorf("%w: the brokers at %s refused the client certificate tls.cert_file %s (%v); set tls.cert_file and tls.key_file (EOS_TLS_CERT_FILE, EOS_TLS_KEY_FILE) to a certificate that is valid now and signed by a CA the brokers trust",
			ErrAuthentication, brokers, cfg.TLS.CertFile, err)
	}
	return nil
}

// createTopics makes the missing topics as CreateTopics asked. Clients
// that meet a topic before its metadata spreads retry until it has.
func (pc *preflightCheck) createTopics(ctx context.Context, adm *kadm.Client, missing []string) error {
	err := kafkautil.RequestTopics(ctx, adm, pc.create.partitions, pc.create.replication, nil, missing...)
	if isFatal(err) {
		return pc.authz.errOp(fmt.Errorf("creating missing topics %v: %w", missing, err), "Create", missing...)
	}
	if err != nil {
		return unreachable(fmt.Errorf("eos: creating missing topics %v: %w; create them with `eosctl topic create %s`", missing, err, strings.Join(missing, " ")))
	}
	pc.log.Info("created missing topics", zap.Strings("topics", missing),
		zap.Int32("partitions", pc.create.partitions), zap.Int16("replication", pc.create.replication))
	return nil
}

// unreachable marks err, from a request of the start-up checks, as the
// brokers being unreachable (ErrUnreachable) when no broker answered it
// (a connection failure or a timeout) rather than one refusing it: the
// brokers can go away between the first check and the next.
func unreachable(err error) error {
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
