package worker

import "github.com/prometheus/client_golang/prometheus"

// Each job has its own series, in a struct of its own registered by its
// own New...Metrics (RelayMetrics, OrderMetrics, TimeoutMetrics,
// FundsRelayMetrics, FundsMetrics, ConsumerMetrics, ReconcilerMetrics).
// Two series are kept by several jobs, one label value each:
// seckill_messages_published_total (the relay publishes the orders
// queue's messages, the order consumer the timeouts queue's, the funds
// relay the funds queue's) and seckill_worker_dead_lettered_total (each
// consumer its own queue's). Each job registers a counter of its own with its queue as a
// constant label; the registry joins them into one family (same name,
// help and label names). So no job holds another's series, and each
// queue's series is exported, at 0, from the start: a panel over a
// healthy system reads 0, not "No data".

// messagesPublished counts the messages of queue the broker confirmed.
func messagesPublished(queue string) prometheus.Counter {
	return prometheus.NewCounter(prometheus.CounterOpts{
		Name:        "seckill_messages_published_total",
		Help:        "Messages confirmed by the broker, by queue: orders from the relay, timeouts the worker schedules for the orders it commits, funds from the funds relay (RabbitMQ's work goes mostly with these, not with the orders or movements in them).",
		ConstLabels: prometheus.Labels{"queue": queue},
	})
}

// deadLettered counts the messages of queue a consumer gave up.
func deadLettered(queue string) prometheus.Counter {
	return prometheus.NewCounter(prometheus.CounterOpts{
		Name:        "seckill_worker_dead_lettered_total",
		Help:        "Messages the worker judged unprocessable and sent to the dead-letter queue, by queue.",
		ConstLabels: prometheus.Labels{"queue": queue},
	})
}
