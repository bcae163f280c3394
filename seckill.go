// Package seckill is the domain of Seckill, a flash-sale inventory system:
// sales and their stock, buys and the decisions on them, orders and their
// events, the ids that name them, the rules a sale and a name must keep,
// and the outcome codes every refusal carries, with the one table that
// gives each code its error, HTTP status and message.
//
// It imports no driver and knows no storage: Redis (package inventory),
// the SQL ledger (package orders), the message bus (package bus) and HTTP
// (package server) translate to and from these types. The operations on
// them live in the application packages (sales, tickets, sessions, worker).
package seckill
