// Package state keeps the key-value state of stateful pipelines so that it
// stays exactly-once with the records around it.
//
// Each task (one input partition) owns one store per named store: an
// overlay over an engine's Backend. A batch's Put and Delete go to the
// overlay, and Get and Range see the overlay first. At batch end the
// runtime produces the batch's last write per key to the store's changelog
// partition inside the batch's transaction. Only after the transaction
// commits does it write the overlay together with the changelog offset to
// the engine, in one atomic write; an aborted batch drops the overlay and
// the engine never saw its writes, so no wipe is needed after a crash. On
// assignment the runtime restores the store from the changelog, starting
// after the engine's offset. User code sees a store as a RawKV (Get, Put,
// Delete, Range, Prefix); the lifecycle is the runtime's.
//
// Engines are values chosen by the user: Memory keeps the data in memory
// and restores it fully on every assignment; pebble.New, in package
// state/pebble, keeps it on disk and restores only what the changelog
// gained since its last applied offset. That engine lives apart so that a
// pipeline with memory stores only does not link pebble.
// KV adds typed keys and values through the project's codecs.
package state
