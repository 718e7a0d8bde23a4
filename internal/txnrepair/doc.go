// Package txnrepair tells how a transaction that a partition still holds
// open was ended by its coordinator, from proof only: the coordinator's
// own state one epoch on, its log (__transaction_state), or the markers
// it wrote on the transaction's other partitions. The runtime's repair of
// hanging transactions and `eosctl txn` share it, so that both act on the
// same evidence: a proven outcome may be completed (COMMIT or ABORT), an
// unknown one is never guessed. They also share the search for those
// transactions (FindHanging, with one coordinator lookup,
// LookupCoordinators), so that both call the same transactions hanging.
package txnrepair
