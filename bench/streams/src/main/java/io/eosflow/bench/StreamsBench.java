package io.eosflow.bench;

import java.io.IOException;
import java.io.InputStream;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.time.Duration;
import java.util.List;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.TopologyConfig;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.KTable;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.Suppressed;
import org.apache.kafka.streams.kstream.TimeWindows;
import org.apache.kafka.streams.kstream.Windowed;
import org.apache.kafka.streams.state.WindowStore;

/**
 * Kafka Streams side of the eosflow benchmark.
 *
 * <p>Topology {@code upper} (the default): source IN (byte[] key, byte[] value) →
 * mapValues(ASCII uppercase) → sink OUT, keys unchanged, no state stores. The transform is the
 * one the Go pipeline runs: every value byte in 'a'..'z' becomes its uppercase letter (minus
 * 32), every other byte is copied unchanged, into a new array.
 *
 * <p>Topology {@code count}: source IN → groupByKey → count in the RocksDB store "counts" →
 * toStream → sink OUT, each key with its new count as 8 big-endian bytes (LongSerializer), the
 * bytes eosflow's count pipeline writes. The record cache is {@code --cache-max-bytes}
 * (statestore.cache.max.bytes): 0 emits every update, as eosflow does; Kafka Streams' default
 * (10 MB) coalesces updates of a key between commits and emits fewer.
 *
 * <p>Topology {@code windowed}: source IN → groupByKey → windowedBy(TimeWindows.ofSizeAndGrace(
 * {@code --window-ms}, {@code --grace-ms})) → count in the window store "counts" → (with
 * {@code --suppress}: suppress(untilWindowCloses(unbounded())), final results only) → toStream
 * → sink OUT, each key (the user key, not the windowed one) with 16 bytes: the window's start
 * in ms, then its count, both big-endian, the bytes eosflow's windowed pipeline writes. Event
 * time is the input record's timestamp.
 *
 * <p>Topology {@code cpu}: source IN → mapValues(crunch) → sink OUT, the transform of eosflow's
 * cpu pipeline: the value is decoded as JSON ({@code {"id":N,"t":T,"pad":"..."}}), SHA-256 is
 * taken of the bytes of {@code N + ":" + pad}, then {@code --rounds} - 1 more times of the previous
 * digest, and {@code {"id":N,"t":T,"digest":"<hex>"}} is encoded as JSON.
 *
 * <p>stdout carries only protocol lines: {@code READY} once the application first reaches
 * RUNNING, and {@code PROCESSED N} when {@code --expect N} input records were seen (by the
 * transform, or by a peek ahead of groupByKey). Everything else goes to stderr.
 *
 * <p>Exit codes: 0 after {@code PROCESSED N} and a clean close; 1 when Kafka Streams fails or
 * does not close in time; 2 for bad flags, an unreachable broker or a missing topic.
 * SIGTERM closes the application (commits the open transaction) via a shutdown hook.
 */
public final class StreamsBench {

    /** Producer linger.ms used by the benchmark, overriding Kafka Streams' default of 100. */
    static final int LINGER_MS = 5;
    /** How long the broker may take to answer before the app gives up. */
    static final Duration CONNECT_TIMEOUT = Duration.ofSeconds(30);
    /** Bound on KafkaStreams.close(). */
    static final Duration CLOSE_TIMEOUT = Duration.ofSeconds(30);

    private StreamsBench() {}

    /** Command line options. */
    static final class Options {
        String bootstrap = "127.0.0.1:9092";
        String input;
        String output;
        String appId;
        String guarantee = StreamsConfig.EXACTLY_ONCE_V2;
        long commitIntervalMs = 100;
        int threads = 1;
        long expect = 0; // 0: run until SIGTERM
        String topology = "upper";
        long cacheMaxBytes = -1; // -1: Kafka Streams' default
        String stateDir; // null: Kafka Streams' default
        long windowMs = 10_000;
        long graceMs = 1_000;
        boolean suppress;
        boolean tuned;
        int rounds = 550;
        long restoreRecords; // 0: no RESTORED line
        String instanceId; // null: no static membership
        boolean transactionalStores;

        static Options parse(String[] args) {
            Options o = new Options();
            for (int i = 0; i < args.length; i++) {
                String flag = args[i];
                if (flag.equals("-h") || flag.equals("--help")) {
                    throw new UsageException(null);
                }
                if (flag.equals("--suppress")) {
                    o.suppress = true;
                    continue;
                }
                if (flag.equals("--tuned")) {
                    o.tuned = true;
                    continue;
                }
                if (flag.equals("--transactional-stores")) {
                    o.transactionalStores = true;
                    continue;
                }
                String value;
                int eq = flag.indexOf('=');
                if (flag.startsWith("--") && eq > 0) {
                    value = flag.substring(eq + 1);
                    flag = flag.substring(0, eq);
                } else {
                    if (i + 1 >= args.length) {
                        throw new UsageException("flag " + flag + " needs a value");
                    }
                    value = args[++i];
                }
                switch (flag) {
                    case "--bootstrap" -> o.bootstrap = value;
                    case "--input" -> o.input = value;
                    case "--output" -> o.output = value;
                    case "--app-id" -> o.appId = value;
                    case "--guarantee" -> o.guarantee = value;
                    case "--commit-interval-ms" -> o.commitIntervalMs = parseLong(flag, value, 0);
                    case "--threads" -> o.threads = (int) parseLong(flag, value, 1);
                    case "--expect" -> o.expect = parseLong(flag, value, 1);
                    case "--topology" -> o.topology = value;
                    case "--cache-max-bytes" -> o.cacheMaxBytes = parseLong(flag, value, 0);
                    case "--state-dir" -> o.stateDir = value;
                    case "--window-ms" -> o.windowMs = parseLong(flag, value, 1);
                    case "--grace-ms" -> o.graceMs = parseLong(flag, value, 0);
                    case "--rounds" -> o.rounds = (int) parseLong(flag, value, 1);
                    case "--restore-records" -> o.restoreRecords = parseLong(flag, value, 1);
                    case "--instance-id" -> o.instanceId = value;
                    default -> throw new UsageException("unknown flag " + flag);
                }
            }
            if (o.input == null || o.output == null || o.appId == null) {
                throw new UsageException("--input, --output and --app-id are required");
            }
            if (!o.guarantee.equals(StreamsConfig.EXACTLY_ONCE_V2)
                    && !o.guarantee.equals(StreamsConfig.AT_LEAST_ONCE)) {
                throw new UsageException("--guarantee must be exactly_once_v2 or at_least_once, got "
                        + o.guarantee);
            }
            if (!o.topology.equals("upper") && !o.topology.equals("count")
                    && !o.topology.equals("windowed") && !o.topology.equals("cpu")) {
                throw new UsageException("--topology must be upper, count, windowed or cpu, got "
                        + o.topology);
            }
            if (o.suppress && !o.topology.equals("windowed")) {
                throw new UsageException("--suppress applies to --topology windowed only");
            }
            return o;
        }

        private static long parseLong(String flag, String value, long min) {
            long v;
            try {
                v = Long.parseLong(value);
            } catch (NumberFormatException e) {
                throw new UsageException(flag + " wants a number, got " + value);
            }
            if (v < min) {
                throw new UsageException(flag + " must be at least " + min + ", got " + value);
            }
            return v;
        }
    }

    static final class UsageException extends RuntimeException {
        UsageException(String message) {
            super(message);
        }
    }

    static final String USAGE = String.join("\n",
            "usage: java -jar streams-bench.jar --input IN --output OUT --app-id ID [flags]",
            "  --bootstrap HOST:PORT        broker to connect to (default 127.0.0.1:9092)",
            "  --input TOPIC                source topic (must exist)",
            "  --output TOPIC               sink topic (must exist)",
            "  --app-id ID                  application.id (consumer group, transactional ids)",
            "  --guarantee G                exactly_once_v2 (default) or at_least_once",
            "  --commit-interval-ms MS      commit.interval.ms (default 100)",
            "  --threads N                  num.stream.threads (default 1)",
            "  --tuned                      the Go side's batching: snappy, linger.ms 10, batch.size 1 MB,",
            "                               max.poll.records and buffered.records.per.partition 10000",
            "  --expect N                   print PROCESSED N and exit 0 after N input records",
            "  --topology T                 upper (default: mapValues), count (groupByKey().count())",
            "                               windowed (groupByKey().windowedBy(TimeWindows).count())",
            "                               or cpu (mapValues: JSON decode, SHA-256 rounds, JSON encode)",
            "  --rounds N                   cpu: SHA-256 rounds per record (default 550)",
            "  --window-ms MS               windowed: tumbling window size (default 10000)",
            "  --grace-ms MS                windowed: grace after a window's end (default 1000)",
            "  --suppress                   windowed: final results only (suppress untilWindowCloses)",
            "  --cache-max-bytes B          statestore.cache.max.bytes (default: Kafka Streams' 10 MB)",
            "  --state-dir DIR              state.dir (default: Kafka Streams' <tmp>/kafka-streams)",
            "  --restore-records N          print RESTORED {json} once N changelog records were restored,",
            "                               or at shutdown with what was",
            "  --instance-id ID             the main consumer's group.instance.id (static membership)",
            "  --transactional-stores       enable.transactional.statestores=true (KIP-892)",
            "stdout: READY once RUNNING; PROCESSED N when --expect is reached; RESTORED as above.");

    /** ASCII-uppercases value into a new array: 'a'..'z' minus 32, other bytes unchanged. */
    static byte[] upper(byte[] value) {
        if (value == null) {
            return null; // tombstones pass through
        }
        byte[] out = new byte[value.length];
        for (int i = 0; i < value.length; i++) {
            byte b = value[i];
            out[i] = (b >= 'a' && b <= 'z') ? (byte) (b - 32) : b;
        }
        return out;
    }

    /** Thread-safe once configured; shared by every stream thread. */
    static final ObjectMapper JSON = new ObjectMapper();

    private static final char[] HEX = "0123456789abcdef".toCharArray();

    /**
     * The cpu topology's transform, eosflow's bench.Crunch: decode {"id":N,"t":T,"pad":"..."},
     * SHA-256 of N + ":" + pad, then rounds - 1 more rounds over the digest, and encode
     * {"id":N,"t":T,"digest":"<hex>"}.
     */
    static byte[] crunch(byte[] value, int rounds) {
        try {
            JsonNode in = JSON.readTree(value);
            if (in == null || !in.path("id").canConvertToLong()) {
                throw new IllegalArgumentException("value is not a cpu pipeline record (JSON with id and pad)");
            }
            long id = in.path("id").asLong();
            long sent = in.path("t").asLong();
            MessageDigest sha = MessageDigest.getInstance("SHA-256");
            byte[] d = sha.digest((id + ":" + in.path("pad").asText("")).getBytes(StandardCharsets.UTF_8));
            for (int i = 1; i < rounds; i++) {
                d = sha.digest(d);
            }
            char[] hex = new char[d.length * 2];
            for (int i = 0; i < d.length; i++) {
                hex[2 * i] = HEX[(d[i] >> 4) & 0xf];
                hex[2 * i + 1] = HEX[d[i] & 0xf];
            }
            ObjectNode out = JSON.createObjectNode();
            out.put("id", id);
            out.put("t", sent);
            out.put("digest", new String(hex));
            return JSON.writeValueAsBytes(out);
        } catch (IOException e) {
            throw new IllegalArgumentException("value is not JSON: " + e.getMessage(), e);
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException("this JVM has no SHA-256", e);
        }
    }

    /** The name of the count topology's store; its changelog is APP_ID-counts-changelog. */
    static final String COUNT_STORE = "counts";

    /** The name of the windowed topology's suppression; its buffer is "final-store". */
    static final String SUPPRESS_NAME = "final";

    /** A window's start (ms) and count as 16 big-endian bytes, as eosflow writes them. */
    static byte[] windowedCount(long startMs, long count) {
        return ByteBuffer.allocate(16).putLong(startMs).putLong(count).array();
    }

    static Topology topology(Options o, Properties config, AtomicLong processed, long expect,
            CountDownLatch reached) {
        StreamsBuilder builder = new StreamsBuilder(new TopologyConfig(new StreamsConfig(config)));
        if (o.topology.equals("windowed")) {
            KTable<Windowed<byte[]>, Long> counts = builder
                    .stream(o.input, Consumed.with(Serdes.ByteArray(), Serdes.ByteArray()))
                    .peek((k, v) -> {
                        if (processed.incrementAndGet() == expect) {
                            reached.countDown();
                        }
                    })
                    .groupByKey()
                    .windowedBy(TimeWindows.ofSizeAndGrace(Duration.ofMillis(o.windowMs),
                            Duration.ofMillis(o.graceMs)))
                    .count(Materialized.<byte[], Long, WindowStore<Bytes, byte[]>>as(COUNT_STORE));
            if (o.suppress) {
                counts = counts.suppress(Suppressed.untilWindowCloses(
                        Suppressed.BufferConfig.unbounded()).withName(SUPPRESS_NAME));
            }
            counts.toStream()
                    .filter((wk, c) -> c != null)
                    .map((wk, c) -> KeyValue.pair(wk.key(), windowedCount(wk.window().start(), c)))
                    .to(o.output, Produced.with(Serdes.ByteArray(), Serdes.ByteArray()));
            return builder.build();
        }
        if (o.topology.equals("count")) {
            builder.stream(o.input, Consumed.with(Serdes.ByteArray(), Serdes.ByteArray()))
                    .peek((k, v) -> {
                        // Counts input records, as the upper topology counts transform calls.
                        if (processed.incrementAndGet() == expect) {
                            reached.countDown();
                        }
                    })
                    .groupByKey()
                    .count(Materialized.as(COUNT_STORE))
                    .toStream()
                    .to(o.output, Produced.with(Serdes.ByteArray(), Serdes.Long()));
            return builder.build();
        }
        if (o.topology.equals("cpu")) {
            int rounds = o.rounds;
            builder.stream(o.input, Consumed.with(Serdes.ByteArray(), Serdes.ByteArray()))
                    .mapValues(v -> {
                        if (processed.incrementAndGet() == expect) {
                            reached.countDown();
                        }
                        return v == null ? null : crunch(v, rounds);
                    })
                    .to(o.output, Produced.with(Serdes.ByteArray(), Serdes.ByteArray()));
            return builder.build();
        }
        builder.stream(o.input, Consumed.with(Serdes.ByteArray(), Serdes.ByteArray()))
                .mapValues(v -> {
                    // Counts transform calls. Under exactly_once_v2 a record re-processed after an
                    // aborted transaction counts again; the harness checks the output itself.
                    if (processed.incrementAndGet() == expect) {
                        reached.countDown();
                    }
                    return upper(v);
                })
                .to(o.output, Produced.with(Serdes.ByteArray(), Serdes.ByteArray()));
        return builder.build();
    }

    static Properties config(Options o) {
        Properties p = new Properties();
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, o.appId);
        p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, o.bootstrap);
        p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, o.guarantee);
        p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, o.commitIntervalMs);
        p.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, o.threads);
        p.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.ByteArraySerde.class);
        p.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.ByteArraySerde.class);
        p.put(StreamsConfig.consumerPrefix(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG), "earliest");
        p.put(StreamsConfig.producerPrefix(ProducerConfig.LINGER_MS_CONFIG), LINGER_MS);
        if (o.tuned) {
            tune(p);
        }
        if (o.cacheMaxBytes >= 0) {
            p.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, o.cacheMaxBytes);
        }
        if (o.stateDir != null) {
            p.put(StreamsConfig.STATE_DIR_CONFIG, o.stateDir);
        }
        if (o.instanceId != null) {
            // Static membership, as eosflow's instance_id: a restart rejoins at once instead
            // of waiting out the dead member's session.
            p.put(StreamsConfig.mainConsumerPrefix(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG), o.instanceId);
        }
        if (o.transactionalStores) {
            p.put(StreamsConfig.TRANSACTIONAL_STATE_STORES_CONFIG, true);
        }
        // No global state here; opting in to the 5.0 behaviour only silences a startup warning.
        // The partition assignor re-reads the config from the main consumer's settings, so the
        // flag goes there too.
        p.put(StreamsConfig.PROCESSING_EXCEPTION_HANDLER_GLOBAL_ENABLED_CONFIG, true);
        p.put(StreamsConfig.mainConsumerPrefix(
                StreamsConfig.PROCESSING_EXCEPTION_HANDLER_GLOBAL_ENABLED_CONFIG), true);
        return p;
    }

    /**
     * The batching franz-go gives the Go side by default, so that both move records in
     * equally big requests: snappy compression, linger.ms 10, batches up to Kafka's
     * max.message.bytes; polls of up to 10,000 records and as many buffered per partition
     * (Kafka Streams' defaults are 1,000 each). Fetch sizes and waits are already equal.
     */
    static void tune(Properties p) {
        p.put(StreamsConfig.producerPrefix(ProducerConfig.COMPRESSION_TYPE_CONFIG), "snappy");
        p.put(StreamsConfig.producerPrefix(ProducerConfig.LINGER_MS_CONFIG), TUNED_LINGER_MS);
        p.put(StreamsConfig.producerPrefix(ProducerConfig.BATCH_SIZE_CONFIG), TUNED_BATCH_BYTES);
        p.put(StreamsConfig.consumerPrefix(ConsumerConfig.MAX_POLL_RECORDS_CONFIG), TUNED_POLL_RECORDS);
        p.put("buffered.records.per.partition", TUNED_POLL_RECORDS);
    }

    static final int TUNED_LINGER_MS = 10;
    static final int TUNED_BATCH_BYTES = 1_000_012;
    static final int TUNED_POLL_RECORDS = 10_000;

    /** Waits up to CONNECT_TIMEOUT for the broker and checks that both topics exist. */
    static void preflight(Options o) {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, o.bootstrap);
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, (int) CONNECT_TIMEOUT.toMillis());
        p.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, (int) CONNECT_TIMEOUT.toMillis());
        try (Admin admin = Admin.create(p)) {
            long deadline = System.nanoTime() + CONNECT_TIMEOUT.toNanos();
            try {
                admin.describeCluster().clusterId().get(CONNECT_TIMEOUT.toMillis(), TimeUnit.MILLISECONDS);
            } catch (TimeoutException | ExecutionException e) {
                throw new Fatal(2, "broker " + o.bootstrap + " unreachable within "
                        + CONNECT_TIMEOUT.toSeconds() + " s (" + rootMessage(e)
                        + "); start it or fix --bootstrap");
            }
            long left = Math.max(1, TimeUnit.NANOSECONDS.toMillis(deadline - System.nanoTime()));
            Set<String> names;
            try {
                names = admin.listTopics().names().get(left, TimeUnit.MILLISECONDS);
            } catch (TimeoutException | ExecutionException e) {
                throw new Fatal(2, "listing topics on " + o.bootstrap + " failed: " + rootMessage(e));
            }
            for (String t : List.of(o.input, o.output)) {
                if (!names.contains(t)) {
                    throw new Fatal(2, "topic " + t + " does not exist on " + o.bootstrap
                            + "; create it first");
                }
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new Fatal(1, "interrupted while connecting");
        }
    }

    static final class Fatal extends RuntimeException {
        final int code;

        Fatal(int code, String message) {
            super(message);
            this.code = code;
        }
    }

    /** The Kafka client version on the class path, from the clients jar's version file. */
    static String kafkaVersion() {
        try (InputStream in = KafkaStreams.class.getResourceAsStream("/kafka/kafka-version.properties")) {
            if (in != null) {
                Properties p = new Properties();
                p.load(in);
                return p.getProperty("version", "unknown");
            }
        } catch (IOException e) {
            // fall through
        }
        return "unknown";
    }

    static String rootMessage(Throwable t) {
        Throwable c = t;
        while (c.getCause() != null && c.getCause() != c) {
            c = c.getCause();
        }
        String m = c.getMessage();
        return c.getClass().getSimpleName() + (m == null ? "" : ": " + m);
    }

    /**
     * Closes streams on SIGTERM, SIGINT or System.exit (committing what is open and leaving the
     * group), then, with --restore-records, prints what was restored if it was not yet.
     */
    static void onShutdown(KafkaStreams streams, Options o) {
        RestoreReport restores = o.restoreRecords > 0 ? new RestoreReport(o.restoreRecords) : null;
        if (restores != null) {
            streams.setGlobalStateRestoreListener(restores);
        }
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            streams.close(CLOSE_TIMEOUT);
            if (restores != null) {
                restores.finish();
            }
        }, "streams-bench-shutdown"));
    }

    public static void main(String[] args) throws InterruptedException {
        Options o;
        try {
            o = Options.parse(args);
        } catch (UsageException e) {
            if (e.getMessage() == null) {
                System.out.println(USAGE);
                System.exit(0);
            }
            System.err.println("streams-bench: " + e.getMessage());
            System.err.println(USAGE);
            System.exit(2);
            return;
        }

        try {
            preflight(o);
        } catch (Fatal f) {
            System.err.println("streams-bench: " + f.getMessage());
            System.exit(f.code);
        }

        if (o.topology.equals("windowed")) {
            System.err.printf("streams-bench: windows of %d ms, grace %d ms, %s%n", o.windowMs,
                    o.graceMs, o.suppress ? "final results (suppress)" : "every update");
        }
        System.err.printf("streams-bench: kafka-streams %s, topology %s, %s, commit.interval.ms=%d, "
                        + "num.stream.threads=%d, linger.ms=%d, statestore.cache.max.bytes=%s, "
                        + "%s%s -> %s, application.id=%s%n",
                kafkaVersion(), o.topology, o.guarantee, o.commitIntervalMs, o.threads,
                o.tuned ? TUNED_LINGER_MS : LINGER_MS,
                o.cacheMaxBytes >= 0 ? Long.toString(o.cacheMaxBytes) : "default",
                o.tuned ? "tuned (snappy, batch.size 1000012, max.poll.records 10000), " : "",
                o.input, o.output, o.appId);

        AtomicLong processed = new AtomicLong();
        CountDownLatch reached = new CountDownLatch(1); // --expect reached
        CountDownLatch failed = new CountDownLatch(1);  // Kafka Streams went to ERROR
        AtomicReference<Throwable> failure = new AtomicReference<>();
        AtomicBoolean ready = new AtomicBoolean();

        Properties config = config(o);
        KafkaStreams streams = new KafkaStreams(
                topology(o, config, processed, o.expect > 0 ? o.expect : -1, reached), config);
        streams.setStateListener((next, prev) -> {
            if (next == KafkaStreams.State.RUNNING && ready.compareAndSet(false, true)) {
                System.out.println("READY");
                System.out.flush();
            } else if (next == KafkaStreams.State.ERROR) {
                failed.countDown();
            }
        });
        streams.setUncaughtExceptionHandler(e -> {
            failure.compareAndSet(null, e);
            return StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });

        onShutdown(streams, o);

        streams.start();

        // Wait for --expect to be reached or for Kafka Streams to fail. Without --expect the
        // app runs until a signal; the shutdown hook then closes it.
        while (true) {
            if (reached.await(100, TimeUnit.MILLISECONDS)) {
                System.out.println("PROCESSED " + o.expect);
                System.out.flush();
                boolean closed = streams.close(CLOSE_TIMEOUT);
                if (!closed) {
                    System.err.println("streams-bench: close did not finish within "
                            + CLOSE_TIMEOUT.toSeconds() + " s");
                }
                System.exit(closed ? 0 : 1);
            }
            if (failed.getCount() == 0) {
                Throwable t = failure.get();
                System.err.println("streams-bench: kafka streams failed"
                        + (t == null ? "" : ": " + rootMessage(t)));
                if (t != null) {
                    t.printStackTrace();
                }
                streams.close(CLOSE_TIMEOUT);
                System.exit(1);
            }
        }
    }
}
