// Package config holds the one Config of an eosflow application: where the
// brokers are, what the application and this instance are called, which
// delivery guarantee to run with, and the timing, TLS and SASL settings.
//
// # Precedence
//
// A setting takes the last value found in this order:
//
//  1. Default(), whose values are the Default* constants;
//  2. the YAML file given to Load, if any;
//  3. EOS_* environment variables (FromEnv), which win over the file.
//
// So a file can hold the shared settings and the environment the
// per-deployment ones (EOS_INSTANCE_ID, EOS_SASL_PASSWORD). An environment
// variable that is set but empty counts as unset.
//
// Every YAML key maps to a variable: EOS_ followed by the upper-cased path with
// dots as underscores, e.g. tls.ca_file is EOS_TLS_CA_FILE:
//
//	brokers              EOS_BROKERS (comma separated)   required
//	app_id               EOS_APP_ID                      required
//	instance_id          EOS_INSTANCE_ID                 host name
//	guarantee            EOS_GUARANTEE                   exactly-once
//	commit_interval      EOS_COMMIT_INTERVAL             100ms
//	adaptive_commit      EOS_ADAPTIVE_COMMIT             false (true: a batch ends once the records at hand are processed)
//	max_batch_records    EOS_MAX_BATCH_RECORDS           50000
//	transaction_timeout  EOS_TRANSACTION_TIMEOUT         10s
//	session_timeout      EOS_SESSION_TIMEOUT             45s
//	rebalance_timeout    EOS_REBALANCE_TIMEOUT           60s
//	group_protocol       EOS_GROUP_PROTOCOL              classic (consumer: KIP-848, Kafka 4.0+)
//	connect_timeout      EOS_CONNECT_TIMEOUT             10s
//	recovery_timeout     EOS_RECOVERY_TIMEOUT            5m
//	max_task_idle        EOS_MAX_TASK_IDLE               0 (joins: wait only for fetched-behind partitions; -1ms: never)
//	leave_group_on_close EOS_LEAVE_GROUP_ON_CLOSE        false
//	state_dir            EOS_STATE_DIR                   <temp>/eosflow (stores under <app_id>/<instance_id>)
//	log_level            EOS_LOG_LEVEL                   info
//	workers              EOS_WORKERS                     1 (auto: one per GOMAXPROCS; at most 256)
//	max_memory           EOS_MAX_MEMORY                  128MiB per worker (e.g. 256MiB, 1GiB; at least 16MiB per worker)
//	metrics_addr         EOS_METRICS_ADDR                off (e.g. 127.0.0.1:9464 serves /metrics, /healthz, /readyz)
//	metrics_serve_queries EOS_METRICS_SERVE_QUERIES      false (true: metrics_addr also serves GET /stores/{store}/keys/{key})
//	tls.enabled          EOS_TLS_ENABLED                 false
//	tls.ca_file          EOS_TLS_CA_FILE
//	tls.cert_file        EOS_TLS_CERT_FILE
//	tls.key_file         EOS_TLS_KEY_FILE
//	tls.insecure_skip_verify  EOS_TLS_INSECURE_SKIP_VERIFY  false
//	sasl.mechanism       EOS_SASL_MECHANISM              none
//	sasl.username        EOS_SASL_USERNAME
//	sasl.password        EOS_SASL_PASSWORD
//
// # Names
//
// app_id is the consumer group id; instance_id is the consumer's
// group.instance.id (static membership). Together they make the
// transactional.id, app_id:instance_id (e.g. orders-eu:1): the ':' cannot
// occur in either name, so two applications never share a transactional.id
// and fence each other. Grant an application's transactional ids with an ACL
// on the prefix app_id: (e.g. orders-eu:).
//
// With workers N > 1 one process runs N workers, and worker i is the
// instance instance_id_i: transactional.id app_id:instance_id_i, its own
// group.instance.id and state directory
// <state_dir>/<app_id>/<instance_id>_i. Changing N changes the set of ids.
// The '_' (WorkerSeparator) may not occur in instance_id, so no instance
// can have a worker's id: with '-', instance pod with 2 workers and
// instance pod-1 would share pod-1. Releases before this rule named worker
// i instance_id-i: upgrading a deployment with workers > 1 (or renaming an
// instance_id that has a '_') gives its workers new transactional.ids,
// group members and state directories. Stop the old processes cleanly
// first, so no transaction of an old id is left open; the old static
// members stay in the group until session_timeout (eosctl group leave
// removes them at once), and stores restore from their changelogs into the
// new directories (the old ones are left in place, to be deleted by hand).
//
// Loading never validates, so a program can adjust the result first; call
// Config.Validate before use. Every problem is a *FieldError naming the
// setting and the fix, and matches ErrInvalid. Validate also rejects what
// would only fail at run time: values a broker with Kafka's default settings
// refuses (session_timeout outside 6s to 30m; with exactly-once a
// transaction_timeout above 15m) and values franz-go refuses (an app_id over
// 256 characters, a rebalance_timeout under 100ms). Brokers may be set
// differently; `eosctl doctor --config` checks a config against their actual
// limits. The SASL password is redacted
// wherever a Config is printed, logged or marshalled.
package config
