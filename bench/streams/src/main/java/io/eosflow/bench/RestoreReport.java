package io.eosflow.bench;

import java.lang.management.ManagementFactory;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;

import com.sun.management.OperatingSystemMXBean;

import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.streams.processor.StateRestoreListener;

/**
 * Counts the changelog records Kafka Streams restores and prints, once, the line eosflow's bench
 * workers print: {@code RESTORED {"records":N,"took":NS,"wall":NS}}. It prints when the count
 * reaches the target, or, if it never does, when {@link #finish} is called at shutdown: a
 * restart after a crash restores however much its stores lost. {@code took} runs from the first
 * restore's start to the last one's end (or to the print), {@code wall} from the app's start, and
 * {@code cpu_at_start} is the process's CPU time when the first restore began, so that the bench
 * can leave the JVM's start out of the restore's CPU.
 */
final class RestoreReport implements StateRestoreListener {
    private final long target;
    private final long started = System.nanoTime();
    private final AtomicLong records = new AtomicLong();
    private final AtomicBoolean begun = new AtomicBoolean();
    private volatile long firstStart;
    private volatile long cpuAtStart;
    private final AtomicLong lastEnd = new AtomicLong();
    private final AtomicBoolean ended = new AtomicBoolean();
    private final AtomicBoolean printed = new AtomicBoolean();

    RestoreReport(long target) {
        this.target = target;
    }

    @Override
    public void onRestoreStart(TopicPartition tp, String store, long start, long end) {
        if (begun.compareAndSet(false, true)) {
            cpuAtStart = processCpuNanos();
            firstStart = System.nanoTime();
        }
    }

    private static long processCpuNanos() {
        if (ManagementFactory.getOperatingSystemMXBean() instanceof OperatingSystemMXBean os) {
            return Math.max(0, os.getProcessCpuTime());
        }
        return 0;
    }

    @Override
    public void onBatchRestored(TopicPartition tp, String store, long batchEnd, long n) {
        if (records.addAndGet(n) >= target) {
            print(System.nanoTime());
        }
    }

    @Override
    public void onRestoreEnd(TopicPartition tp, String store, long total) {
        lastEnd.set(System.nanoTime());
        ended.set(true);
    }

    /** Prints the line if it was not printed yet: what was restored by now. */
    void finish() {
        print(ended.get() ? lastEnd.get() : System.nanoTime());
    }

    private void print(long now) {
        if (!printed.compareAndSet(false, true)) {
            return;
        }
        long took = begun.get() ? Math.max(0, now - firstStart) : 0;
        System.out.printf("RESTORED {\"records\":%d,\"took\":%d,\"wall\":%d,\"cpu_at_start\":%d}%n",
                records.get(), took, System.nanoTime() - started, cpuAtStart);
        System.out.flush();
    }
}
