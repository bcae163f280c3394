#!/usr/bin/env bash
# CPU per accepted order of each process, the seckill child (server, relay
# and worker), Redis (redis-server), RabbitMQ (beam.smp) and MariaDB
# (mariadbd), under an 8 s closed loop of buys (seckill loadtest -c 64) against a
# `seckill all` child on the local services, with names of its own that it
# removes afterwards. The figures behind "make an order cheaper" (BENCHMARKS.md,
# Capacity). Run after `make build`:
#
#   scripts/pipeline-cpu.sh                               # as configured
#   scripts/pipeline-cpu.sh SECKILL_RELAY_LINGER=0        # settings for the child
#   SQL='ALTER TABLE orders DROP INDEX orders_user' scripts/pipeline-cpu.sh
#                                                         # SQL on its ledger after the migration
#   SECKILL_BIN=/tmp/seckill-old scripts/pipeline-cpu.sh  # another build (before/after)
#
# It prints the orders accepted, each process's CPU per order, the messages
# published, the relay's publish calls and the worker's transactions (from
# /metrics).
set -euo pipefail
. "$(dirname "$0")/child.sh"
[[ -n ${SQL:-} ]] && mariadb -uroot "seckill_$pfx" -e "$SQL"

c0=$(self) r0=$(ticks redis-server) b0=$(ticks beam.smp) m0=$(ticks mariadbd)
out=$("$bin" loadtest --url "http://$http" --create-sale total=100000000,limit=100000000 --users 5000 -c 64 --duration 8s --wait-persist 30s 2>&1)
c1=$(self) r1=$(ticks redis-server) b1=$(ticks beam.smp) m1=$(ticks mariadbd)
orders=$(grep -E '^ *accepted ' <<<"$out" | grep -oE '[0-9]+ orders' | grep -oE '[0-9]+' | head -1)
hz=$(getconf CLK_TCK)
awk -v o="$orders" -v c=$((c1 - c0)) -v r=$((r1 - r0)) -v b=$((b1 - b0)) -v m=$((m1 - m0)) -v hz="$hz" 'BEGIN {
  f = 1e6 / hz / o
  printf "orders accepted %d; µs of CPU per order: seckill %.1f, Redis %.1f, RabbitMQ %.1f, MariaDB %.1f, total %.1f\n",
    o, c * f, r * f, b * f, m * f, (c + r + b + m) * f }'
curl -s "http://$ops/metrics" | grep -E '^seckill_(relay_batch_seconds_count|worker_batch_size_count|messages_published_total)' |
  sed 's/seckill_relay_batch_seconds_count/relay publish calls/; s/seckill_worker_batch_size_count/worker transactions/;
    s/seckill_messages_published_total{queue="\(.*\)"}/messages published to \1/'
