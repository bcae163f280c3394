// The outcome codes the pages act on, and the states they show (of a
// sale, a waiting room, an order, a top-up; the kinds of a transfer),
// named in this one module. Every refusal shows the server's own message;
// the pages branch only on these codes (the server's, from its one table:
// docs/api.md, Errors) and the two of their own in Local.
export const Code = Object.freeze({
  OK: "ok",
  SoldOut: "sold_out",
  LimitExceeded: "limit_exceeded",
  NotStarted: "not_started",
  Ended: "ended",
  Paused: "paused",
  RateLimited: "rate_limited",
  Unavailable: "unavailable",
  Unauthenticated: "unauthenticated",
  OrderCancelled: "order_cancelled",
  TicketRequired: "ticket_required",
  TicketInvalid: "ticket_invalid",
  PowInvalid: "pow_invalid",
  NotEligible: "not_eligible",
  PassRequired: "pass_required",
  PassInvalid: "pass_invalid",
  InsufficientFunds: "insufficient_funds",
  HoldExpired: "hold_expired",
  OrderRefunded: "order_refunded",
  EmailTaken: "email_taken",
  Internal: "internal",
});

// Local are the pages' own codes, for what never got an answer.
export const Local = Object.freeze({
  // Network: the server could not be reached.
  Network: "network",
  // Pow: this browser could not run the proof of work.
  Pow: "pow",
});

// Phase is a sale's state as shoppers see it (a sale's "status"; some
// share a word with a code).
export const Phase = Object.freeze({
  Scheduled: "scheduled",
  Active: "active",
  Paused: "paused",
  SoldOut: "sold_out",
  Ended: "ended",
});

// QueueStatus is where a shopper stands in a sale's waiting room.
export const QueueStatus = Object.freeze({
  Waiting: "waiting",
  Admitted: "admitted",
  SoldOut: "sold_out",
  NotInQueue: "not_in_queue",
});

// OrderStatus is where an order stands.
export const OrderStatus = Object.freeze({
  Pending: "pending",
  Paid: "paid",
  Cancelled: "cancelled",
  Refunded: "refunded",
});

// TransferKind says why money moved: a statement line's kind.
export const TransferKind = Object.freeze({
  Topup: "topup",
  Charge: "charge",
  Fee: "fee",
  Refund: "refund",
  Credit: "credit",
  Payout: "payout",
  Void: "void",
});

// TopupStatus is where a top-up stands: pending until the provider says
// the shopper paid (succeeded) or gave up (failed).
export const TopupStatus = Object.freeze({
  Pending: "pending",
  Succeeded: "succeeded",
  Failed: "failed",
});

// PayoutStatus is where a merchant's payout stands: pending until the
// provider took it (paid) or refused it (failed: the money came back).
export const PayoutStatus = Object.freeze({
  Pending: "pending",
  Paid: "paid",
  Failed: "failed",
});
