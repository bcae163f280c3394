package system

// ConsumerLedger is the ledger the consumers of s write (for tests).
var ConsumerLedger = (*System).consumerLedger
