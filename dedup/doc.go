// Package dedup remembers which message ids already had their side effect, so
// that a consumer which sees a message again (Kafka delivers at least once to
// anything outside a Kafka transaction: a database, a cache, a call to another
// service) can skip it. This is the article's "distributed dedup store"
// pattern of idempotent consumers.
//
// A Store marks an id with a time to live. Mark is atomic: of all the callers
// that mark one id while it lives, exactly one is told it came first; that
// caller performs the effect, the others skip it. Five stores implement it:
//
//   - Memory (this package): a bounded map in this process. For tests and
//     for a single instance; it forgets everything when the process exits,
//     so after a restart every redelivered message looks new.
//   - redisdedup.New: SET key NX PX ttl, the article's SETNX. Shared by
//     every instance; it forgets ids when Redis restarts without persistence
//     or evicts keys under memory pressure (maxmemory-policy), and then
//     duplicates pass.
//   - redisdedup.NewSortedSet: the article's variant, one sorted set whose
//     members are ids scored with their expiry; Purge removes expired ones
//     (ZREMRANGEBYSCORE). Risks what Redis risks, and grows until purged.
//   - pgdedup.New: a table with a unique id and an expiry, INSERT ... ON
//     CONFLICT. Durable; when the effect is a write to the same database,
//     prefer putting the id in that write's own transaction (the article's
//     "database constraint" pattern), which needs no separate store at all.
//   - redisdedup.NewBloom: the article's Bloom filter, in Redis bitmaps
//     shared by every instance, in two time-sliced generations so that ids
//     expire. A fixed few bits per id, but approximate: a false positive
//     reports a new id as seen and its effect is skipped (about
//     FalsePositiveRate of new ids, more if the filter holds more than it
//     was sized for), and it cannot Forget (ErrCannotForget). Only where
//     losing an occasional effect is acceptable; topology.Dedup needs
//     AcceptFalsePositives. BloomOptions and SizeBloom size it here.
//
// The Redis and PostgreSQL stores live in packages of their own,
// redisdedup and pgdedup, so that this package, and a pipeline that uses
// only Memory or no store, links neither client.
//
// When to mark is the article's trade-off, and a Store does not choose it:
// mark before the effect and a crash between the two loses the effect (the id
// is marked, the redelivered message is skipped); mark after the effect and a
// crash between the two repeats it (the redelivered message is not marked
// yet). Mark-before with Forget on a failed effect narrows the loss to real
// crashes (not with a Bloom filter, which cannot forget: mark after with it).
// A Leaser (every store but the Bloom filter) closes the gap: Claim writes
// the mark as pending for its owner with a lease, Complete makes it done
// once the effect happened, Release drops it after a failure. Another owner that
// finds it pending waits and never skips it; once the lease expired (the
// owner died mid-effect) it takes the mark over and runs the effect again:
// at least once for an owner that died mid-effect, never zero times.
// In a pipeline, topology.Dedup does this for you, in either mode.
//
// Keep ids for twice the longest redelivery window (consumer lag, retry
// storms, clock skew): an id that expires or is evicted before its last
// redelivery makes that redelivery look new. `eosctl dedup size` computes
// what that retention costs.
//
// A store that cannot answer returns an error (a *StoreError naming the
// store and its address) within its timeout (redisdedup.Timeout,
// pgdedup.Timeout; DefaultTimeout unless set); whether to
// process the message anyway (fail open: risk a duplicate) or to stop (fail
// closed: risk stalling) is the caller's choice. The article notes that most systems fail open.
package dedup
