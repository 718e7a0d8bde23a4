package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/internal/kafkautil"
	"github.com/eosflow/eosflow/internal/txnrepair"
	"go.uber.org/zap"
)

// Exit codes: scripts and CI rely on these, so they never change meaning.
const (
	exitOK      = 0 // the command worked and found nothing wrong
	exitFailure = 1 // a finding (e.g. hanging transaction, failed check) or an error
	exitUsage   = 2 // the command line itself was wrong
)

// defaultBroker is where a local Kafka (or `eosctl dev broker`) listens.
const defaultBroker = "127.0.0.1:9092"

// usageError marks a mistake in how eosctl was called, so it exits 2 rather
// than 1 and the message points at --help.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// usageErrorf builds a usageError from a format string.
func usageErrorf(format string, a ...any) error {
	return usageError{fmt.Errorf(format, a...)}
}

// exitError ends the command with a specific exit code. A nil err means the
// command's output already explains the outcome (e.g. the failed doctor
// checks), so nothing more is printed.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}
func (e *exitError) Unwrap() error { return e.err }

// errFindings reports that the command ran but found problems it printed.
var errFindings = &exitError{code: exitFailure}

// usageArgs wraps a cobra argument validator so its errors exit 2.
func usageArgs(v cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := v(cmd, args); err != nil {
			return usageError{err}
		}
		return nil
	}
}

// cobraUsagePrefixes are the starts of the errors cobra itself returns for
// flag validation it performs before RunE; they are usage errors too.
var cobraUsagePrefixes = []string{
	"required flag(s)",
	"if any flags in the group",
	"at least one of the flags in the group",
	"unknown command",
	"unknown flag",
	"unknown shorthand flag",
	"invalid argument",
	"flag needs an argument",
}

// exitCode maps a command error to the process exit code.
func exitCode(err error) int {
	if err == nil {
		return exitOK
	}
	if _, ok := errors.AsType[usageError](err); ok {
		return exitUsage
	}
	if ee, ok := errors.AsType[*exitError](err); ok {
		return ee.code
	}
	for _, p := range cobraUsagePrefixes {
		if strings.HasPrefix(err.Error(), p) {
			return exitUsage
		}
	}
	return exitFailure
}

// run executes eosctl with args and the given streams and returns the exit
// code; main and the tests both call it, so tests exercise the real wiring.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	root := newRootCmd()
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	cmd, err := root.ExecuteContextC(ctx)
	code := exitCode(err)
	if err == nil {
		return code
	}
	if ee, ok := errors.AsType[*exitError](err); ok && ee.err == nil {
		return code
	}
	fmt.Fprintf(stderr, "eosctl: %v\n", err)
	if code == exitUsage && cmd != nil {
		fmt.Fprintf(stderr, "run '%s --help' for usage\n", cmd.CommandPath())
	}
	return code
}

// newRootCmd builds the eosctl command tree with its persistent flags.
func newRootCmd() *cobra.Command {
	g := &globals{}
	root := &cobra.Command{
		Use:   "eosctl",
		Short: "Operate exactly-once Kafka pipelines",
		Long: "eosctl inspects and repairs the Kafka side of exactly-once pipelines: " +
			"open and hanging transactions, consumer lag against the last stable offset, " +
			"cluster readiness for transactions, and dedup store sizing.",
		SilenceUsage:  true,
		SilenceErrors: true,
		Args:          cobra.ArbitraryArgs,
		RunE:          helpOrUnknown,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			g.brokersSet = cmd.Flags().Changed("brokers")
			return g.validate()
		},
	}
	root.CompletionOptions.DisableDefaultCmd = true
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	g.bindFlags(root)

	root.AddCommand(
		newDemoCmd(g),
		newTxnCmd(g),
		newGroupCmd(g),
		newTopicCmd(g),
		newProduceCmd(g),
		newConsumeCmd(g),
		newAppCmd(g),
		newTopCmd(g),
		newDoctorCmd(g),
		newDedupCmd(g),
		newDevCmd(g),
		newVerifyCmd(g),
		newBenchCmd(g),
		newCompletionCmd(),
	)
	return root
}

// helpOrUnknown is the RunE of commands that only group subcommands: alone
// they print help; with an argument it is an unknown subcommand (exit 2),
// where cobra would otherwise print help and exit 0.
func helpOrUnknown(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return cmd.Help()
	}
	msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
	if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
		msg += fmt.Sprintf("; did you mean %q?", s[0])
	}
	return usageError{errors.New(msg)}
}

// newGroupingCmd builds a command that only holds subcommands.
func newGroupingCmd(use, short string, subs ...*cobra.Command) *cobra.Command {
	c := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.ArbitraryArgs,
		RunE:  helpOrUnknown,
	}
	c.AddCommand(subs...)
	return c
}

// envOr returns the environment variable's value, or def when it is unset
// or empty.
func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// commandContext bounds one command's broker work by --timeout.
func (g *globals) commandContext(cmd *cobra.Command) (context.Context, context.CancelFunc) {
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	return context.WithTimeout(ctx, g.timeout)
}

// pipelineConfig is the client configuration every command connects with:
// defaults, the --config file and EOS_* variables, with the command-line
// flags on top.
func (g *globals) pipelineConfig() (config.Config, error) {
	// Load with no file still applies the EOS_* variables, as the pipeline
	// itself would.
	cfg, err := config.Load(g.configFile)
	if err != nil {
		return cfg, err
	}
	if g.brokersSet || len(cfg.Brokers) == 0 {
		cfg.Brokers = g.brokers
	}
	if g.tls.Enabled {
		cfg.TLS.Enabled = true
	}
	setIf(&cfg.TLS.CAFile, g.tls.CAFile)
	setIf(&cfg.TLS.CertFile, g.tls.CertFile)
	setIf(&cfg.TLS.KeyFile, g.tls.KeyFile)
	if g.tls.InsecureSkipVerify {
		cfg.TLS.InsecureSkipVerify = true
	}
	if cfg.TLS.CAFile != "" || cfg.TLS.CertFile != "" || cfg.TLS.InsecureSkipVerify {
		cfg.TLS.Enabled = true
	}
	setIf(&cfg.SASL.Mechanism, strings.ToUpper(g.sasl.Mechanism))
	setIf(&cfg.SASL.Username, g.sasl.Username)
	setIf(&cfg.SASL.Password, g.sasl.Password)
	if cfg.SASL.Password == "" {
		cfg.SASL.Password = os.Getenv("EOS_SASL_PASSWORD")
	}
	if g.timeout > 0 && (cfg.ConnectTimeout <= 0 || cfg.ConnectTimeout > g.timeout) {
		cfg.ConnectTimeout = g.timeout
	}
	return cfg, nil
}

// setIf overwrites *dst with v when v is set, so flags override the file only
// when given.
func setIf(dst *string, v string) {
	if v != "" {
		*dst = v
	}
}

// globals holds the persistent flags every command shares.
type globals struct {
	brokers    []string
	brokersSet bool // --brokers was given, so it overrides --config
	configFile string
	tls        config.TLS
	sasl       config.SASL
	output     string
	timeout    time.Duration
}

// bindFlags declares the persistent flags on the root command.
func (g *globals) bindFlags(root *cobra.Command) {
	f := root.PersistentFlags()
	f.StringSliceVar(&g.brokers, "brokers", strings.Split(envOr("EOS_BROKERS", defaultBroker), ","),
		"seed brokers as host:port, comma separated (env EOS_BROKERS)")
	f.StringVar(&g.configFile, "config", "", "pipeline config YAML; its brokers, TLS and SASL are used unless flags override them")
	f.BoolVar(&g.tls.Enabled, "tls", false, "connect with TLS")
	f.StringVar(&g.tls.CAFile, "tls-ca", "", "PEM CA bundle to verify the brokers (implies --tls)")
	f.StringVar(&g.tls.CertFile, "tls-cert", "", "PEM client certificate for mutual TLS (implies --tls)")
	f.StringVar(&g.tls.KeyFile, "tls-key", "", "PEM private key for --tls-cert")
	f.BoolVar(&g.tls.InsecureSkipVerify, "tls-insecure", false, "skip broker certificate verification (tests only; implies --tls)")
	f.StringVar(&g.sasl.Mechanism, "sasl-mechanism", "", "SASL mechanism: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512")
	f.StringVar(&g.sasl.Username, "sasl-user", "", "SASL user name")
	f.StringVar(&g.sasl.Password, "sasl-password", "", "SASL password (prefer env EOS_SASL_PASSWORD: flags show up in ps)")
	f.StringVarP(&g.output, "output", "o", outputTable, "output format: table or json")
	f.DurationVar(&g.timeout, "timeout", 10*time.Second, "how long to wait for the brokers"+durationFlagHelp)
	_ = root.RegisterFlagCompletionFunc("output", cobra.FixedCompletions(
		[]string{outputTable, outputJSON}, cobra.ShellCompDirectiveNoFileComp))
	_ = root.RegisterFlagCompletionFunc("sasl-mechanism", cobra.FixedCompletions(
		[]string{config.SASLPlain, config.SASLScramSHA256, config.SASLScramSHA512}, cobra.ShellCompDirectiveNoFileComp))
	_ = root.MarkPersistentFlagFilename("config", "yaml", "yml")
}

// validate checks the persistent flags once, before any command runs.
func (g *globals) validate() error {
	if g.output != outputTable && g.output != outputJSON {
		return usageErrorf("--output must be %q or %q, got %q", outputTable, outputJSON, g.output)
	}
	if g.timeout <= 0 {
		return usageErrorf("--timeout must be positive, got %s", g.timeout)
	}
	var seeds []string
	for _, b := range g.brokers {
		if b = strings.TrimSpace(b); b != "" {
			seeds = append(seeds, b)
		}
	}
	if len(seeds) == 0 {
		return usageErrorf("--brokers is empty; give at least one host:port")
	}
	g.brokers = seeds
	return nil
}

// client connects to the cluster cfg names. It first dials every seed, so
// an unreachable or mistyped --brokers fails fast with a message that says
// so instead of a client retrying until the timeout; then it pings with the
// Kafka protocol, which catches TLS and SASL mistakes.
func (g *globals) client(ctx context.Context, cfg config.Config) (*kgo.Client, error) {
	opts, err := cfg.KgoOpts()
	if err != nil {
		return nil, fmt.Errorf("invalid client settings: %w", err)
	}
	// Half of --timeout at most for the TCP dial, so a black-holed address
	// still leaves time to say so within --timeout.
	dialTimeout := g.timeout / 2
	if cfg.ConnectTimeout > 0 && cfg.ConnectTimeout < dialTimeout {
		dialTimeout = cfg.ConnectTimeout
	}
	if err := reachable(ctx, cfg.Brokers, dialTimeout); err != nil {
		return nil, err
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("invalid client settings: %w", err)
	}
	pctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	if err := cl.Ping(pctx); err != nil {
		cl.Close()
		switch {
		case kafkautil.IsSASLFailure(err):
			return nil, fmt.Errorf("authentication failed: broker(s) %s refused SASL %s login of user %q (%v) — check --sasl-user and the password (EOS_SASL_PASSWORD or --sasl-password), and --sasl-mechanism",
				strings.Join(cfg.Brokers, ", "), cfg.SASL.Mechanism, cfg.SASL.Username, err)
		case kafkautil.IsTLSFailure(err):
			return nil, fmt.Errorf("authentication failed: the certificate of broker(s) %s is not trusted (%v) — pass the CA that signed it with --tls-ca (or tls.ca_file in --config)",
				strings.Join(cfg.Brokers, ", "), err)
		case kafkautil.IsClientCertRefused(err) && cfg.TLS.CertFile == "":
			return nil, fmt.Errorf("authentication failed: broker(s) %s require a client certificate (mutual TLS) and refused the connection without one (%v) — pass one signed by a CA the brokers trust with --tls-cert and --tls-key (or tls.cert_file and tls.key_file in --config)",
				strings.Join(cfg.Brokers, ", "), err)
		case kafkautil.IsClientCertRefused(err):
			return nil, fmt.Errorf("authentication failed: broker(s) %s refused the client certificate %s (%v) — pass one that is valid now and signed by a CA the brokers trust with --tls-cert and --tls-key (or tls.cert_file and tls.key_file in --config)",
				strings.Join(cfg.Brokers, ", "), cfg.TLS.CertFile, err)
		}
		return nil, fmt.Errorf("broker(s) %s accept connections but do not answer Kafka requests: %w — check --tls and --sasl-* (or the --config tls/sasl settings)",
			strings.Join(cfg.Brokers, ", "), err)
	}
	return cl, nil
}

// newAdmin wraps a connected client; admin requests time out with --timeout.
func (g *globals) newAdmin(cl *kgo.Client) *kadm.Client {
	adm := kadm.NewClient(cl)
	adm.SetTimeoutMillis(int32(g.timeout.Milliseconds()))
	return adm
}

// connect is what most commands start with: the pipeline config, a context
// bounded by --timeout, and a connected admin client. The returned func
// closes both.
func (g *globals) connect(cmd *cobra.Command) (context.Context, *kadm.Client, func(), error) {
	cfg, err := g.pipelineConfig()
	if err != nil {
		return nil, nil, nil, err
	}
	ctx, cancel := g.commandContext(cmd)
	cl, err := g.client(ctx, cfg)
	if err != nil {
		cancel()
		return nil, nil, nil, err
	}
	return ctx, g.newAdmin(cl), func() { cl.Close(); cancel() }, nil
}

// withAdmin runs fn with a context bounded by --timeout and a connected
// admin client, and closes both when fn returns: the frame of every
// command that talks to the cluster, so none can forget to close.
func (g *globals) withAdmin(cmd *cobra.Command, fn func(ctx context.Context, adm *kadm.Client) error) error {
	ctx, adm, done, err := g.connect(cmd)
	if err != nil {
		return err
	}
	defer done()
	return fn(ctx, adm)
}

// withOutcomes is withAdmin for the commands that judge transactions: fn
// also gets the evidence search that the runtime's repair uses (see
// txnrepair), over the same connection settings.
func (g *globals) withOutcomes(cmd *cobra.Command, fn func(ctx context.Context, adm *kadm.Client, f *txnrepair.Finder) error) error {
	cfg, err := g.pipelineConfig()
	if err != nil {
		return err
	}
	opts, err := cfg.KgoOpts()
	if err != nil {
		return fmt.Errorf("invalid client settings: %w", err)
	}
	ctx, cancel := g.commandContext(cmd)
	defer cancel()
	cl, err := g.client(ctx, cfg)
	if err != nil {
		return err
	}
	defer cl.Close()
	read := func(topic string, partition int32, offset int64) (*kgo.Client, error) {
		return kgo.NewClient(append(slices.Clone(opts), txnrepair.ReaderOpts(topic, partition, offset)...)...)
	}
	return fn(ctx, g.newAdmin(cl), txnrepair.NewFinder(cl, read, zap.NewNop()))
}

// reachable dials all seeds at once and succeeds if any answers; the error
// names every seed that did not, with the first dial error.
func reachable(ctx context.Context, seeds []string, timeout time.Duration) error {
	errs := make([]error, len(seeds))
	var wg sync.WaitGroup
	for i, s := range seeds {
		wg.Go(func() {
			addr := s
			if _, _, err := net.SplitHostPort(addr); err != nil {
				addr = net.JoinHostPort(addr, "9092") // Kafka's port, as kgo assumes
			}
			d := net.Dialer{Timeout: timeout}
			c, err := d.DialContext(ctx, "tcp", addr)
			if err != nil {
				errs[i] = err
				return
			}
			c.Close()
		})
	}
	wg.Wait()
	var first error
	for _, err := range errs {
		if err == nil {
			return nil
		}
		if first == nil {
			first = err
		}
	}
	return fmt.Errorf("cannot reach broker(s) %s: %w — check --brokers", strings.Join(seeds, ", "), first)
}
