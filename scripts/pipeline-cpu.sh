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
bin=${SECKILL_BIN:-bin/seckill}
unset SECKILL_BIN # the child refuses settings it does not know
pfx=cpu$RANDOM
http=127.0.0.1:18093 ops=127.0.0.1:19093
export SECKILL_HTTP_ADDR=$http SECKILL_OPS_ADDR=$ops SECKILL_REDIS_PREFIX=$pfx SECKILL_AMQP_PREFIX=$pfx \
  SECKILL_MYSQL_DSN="root@tcp(127.0.0.1:3306)/seckill_$pfx?parseTime=true" \
  SECKILL_JWT_SECRET=pipeline-cpu-secret-0123456789abcdef SECKILL_ADMIN_TOKEN=pipeline-cpu-admin-0123456789 \
  SECKILL_RATE_GLOBAL=0 SECKILL_RATE_PER_USER=0 SECKILL_RATE_PER_IP=0 SECKILL_LOG_LEVEL=error SECKILL_WORKER_METRICS_ADDR=

cleanup() {
  [[ -n ${pid:-} ]] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true
  for q in $(rabbitmqctl list_queues name 2>/dev/null | grep "^$pfx\." || true); do rabbitmqctl delete_queue "$q" >/dev/null 2>&1 || true; done
  redis-cli --scan --pattern "$pfx:*" | xargs -r -n 500 redis-cli unlink >/dev/null
  mariadb -uroot -e "DROP DATABASE IF EXISTS seckill_$pfx"
}
trap cleanup EXIT

env "$@" "$bin" all >/tmp/pipeline-cpu-$pfx.log 2>&1 &
pid=$!
until curl -sf "http://$http/readyz" >/dev/null; do
  kill -0 "$pid" 2>/dev/null || { cat "/tmp/pipeline-cpu-$pfx.log"; exit 1; }
  sleep 0.2
done
[[ -n ${SQL:-} ]] && mariadb -uroot "seckill_$pfx" -e "$SQL"

# ticks: user+system clock ticks of every process named $1.
ticks() { local t=0 u s; for p in $(pgrep -x "$1"); do read -r u s < <(cut -d' ' -f14,15 "/proc/$p/stat"); t=$((t + u + s)); done; echo "$t"; }
self() { read -r u s < <(cut -d' ' -f14,15 "/proc/$pid/stat"); echo $((u + s)); }
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
