# Sourced by the measuring scripts: starts a `seckill all` child ($bin, or
# $SECKILL_BIN) on the local services with names of its own ($pfx), the
# rate limits off, and removes them on exit. "$@" are settings for the
# child (NAME=value). Sets pid, http, ops, and ticks/self for CPU readings.
bin=${SECKILL_BIN:-bin/seckill}
unset SECKILL_BIN # the child refuses settings it does not know
pfx=${pfx:-cpu}$RANDOM
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

env "$@" "$bin" all >"/tmp/seckill-child-$pfx.log" 2>&1 &
pid=$!
until curl -sf "http://$http/readyz" >/dev/null; do
  kill -0 "$pid" 2>/dev/null || { cat "/tmp/seckill-child-$pfx.log"; exit 1; }
  sleep 0.2
done

# ticks: user+system clock ticks of every process named $1; self: the child's.
ticks() { local t=0 u s; for p in $(pgrep -x "$1"); do read -r u s < <(cut -d' ' -f14,15 "/proc/$p/stat"); t=$((t + u + s)); done; echo "$t"; }
self() { local u s; read -r u s < <(cut -d' ' -f14,15 "/proc/$pid/stat"); echo $((u + s)); }
