// Package sim explores the runtime's fault space: it runs the real
// runtime (eos.Runner, its clients, state and group membership) in-process
// on the embedded broker under a fault schedule drawn from a seed, and
// judges the output with the verifier's own verdicts.
//
// A schedule is a list of steps (member, point, occurrence, fault). Points
// are protocol moments, not times: each request of the transaction and
// group protocols as a member sends it (seen on the member's own wire,
// which parses the Kafka framing), the user code's start on a record, each
// write to a state store, the end of a restore of state (seen in the
// runtime's log, in the goroutine that restored), in the dedup
// pipelines a side effect's run and each dedup store call, in the
// timer pipeline the user code's start on a timer's firing, and in the
// Postgres sink each database commit as it is sent (seen on its own
// wire, which finds pgx's simple-protocol commit).
// Faults are what the runtime claims to handle there: a refusal with a
// retriable or fatal code, a request applied but answered REQUEST_TIMED_OUT,
// a connection that dies before the request or before its answer, a
// request delayed past the client's timeout (applied after the client
// gave up on it), the coordinators moving to other brokers as a request
// to one is sent (on three brokers), a crash
// (every connection cut at once, the runner abandoned, a new incarnation
// started, its pebble stores reopened from the image a crash leaves), a
// member joining (at a record or a firing, as a restore ends, or while a dedup
// pipeline's side effect runs), a member closing and coming back, a state
// store write refused, user code slower than
// transaction_timeout, a dedup store call failing or applied with its
// answer lost, and a commit the broker answers
// as committed but ends aborted (markers a restarting broker skipped, then
// aborted by a repair), a database commit cut before the server
// sees it or after its answer, and the broker bouncing (every member's
// connections cut, then a second of refusals as its coordinators load).
// The group going 15 s without a commit while no
// live member logs at Info or above is a failure: the runtime never waits
// silently. After a count-pebble run each member starts again alone
// on its disk and counts one more record per key: each store must equal
// its committed changelog. After every run, each pebble store left on a
// disk whose batches all read back as committed must hold exactly the
// fold of its committed changelog up to its offset, and no store may apply
// a batch on End's word before reading back those an earlier incarnation
// applied so.
//
// The same seed and pipeline always draw the same schedule, so a failure
// is replayed with its seed (eosctl verify --explore --seed S); goroutine
// scheduling is not deterministic, so Explore also measures how often a
// failing seed fails again, and shrinks the schedule to its smallest
// failing subset. The coverage table counts the (point, fault) pairs that
// struck per pipeline.
package sim
