package io.eosflow.bench;

import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.streams.processor.StateRestoreListener;

/**
 * Counts the changelog records Kafka Streams restores and prints, once, the line eosflow's bench
 * workers print: {@code RESTORED {"records":N,"took":NS,"wall":NS}}. It prints when the count
 * reaches the target, or, if it never does, when {@link #finish} is called at shutdown: a
 * restart after a crash restores however much its stores lost. {@code took} runs from the first
 * restore's start to the last one's end (or to the print), {@code wall} from the app's start.
 */
final class RestoreReport implements StateRestoreListener {
    private final long target;
    private final long started = System.nanoTime();
    private final AtomicLong records = new AtomicLong();
    private final AtomicLong firstStart = new AtomicLong();
    private final AtomicLong lastEnd = new AtomicLong();
    private final AtomicBoolean printed = new AtomicBoolean();

    RestoreReport(long target) {
        this.target = target;
    }

    @Override
    public void onRestoreStart(TopicPartition tp, String store, long start, long end) {
        firstStart.compareAndSet(0, System.nanoTime());
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
    }

    /** Prints the line if it was not printed yet: what was restored by now. */
    void finish() {
        long end = lastEnd.get();
        print(end == 0 ? System.nanoTime() : end);
    }

    private void print(long now) {
        if (!printed.compareAndSet(false, true)) {
            return;
        }
        long first = firstStart.get();
        long took = first == 0 ? 0 : Math.max(0, now - first);
        System.out.printf("RESTORED {\"records\":%d,\"took\":%d,\"wall\":%d}%n",
                records.get(), took, System.nanoTime() - started);
        System.out.flush();
    }
}
