#!/usr/bin/env bash
# The services the test suite needs, on loopback at their default ports:
# Redis 7, RabbitMQ 3, MariaDB (or MySQL), Chromium for the browser tests
# and wrk for the benchmark suite. On Debian or Ubuntu as root it installs what is missing and starts
# what is not running; elsewhere it says what to install and start. Safe to
# run again and again; never stops or reconfigures a running service.
set -euo pipefail

log() { printf '==> %s\n' "$*"; }

# wait_for NAME SECONDS CMD...: poll CMD until it succeeds or time runs out.
wait_for() {
  local name=$1 secs=$2
  shift 2
  local deadline=$((SECONDS + secs))
  until "$@" >/dev/null 2>&1; do
    if ((SECONDS >= deadline)); then
      echo "$name did not come up within ${secs}s" >&2
      return 1
    fi
    sleep 0.5
  done
}

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

need=()
command -v redis-server >/dev/null || need+=(redis-server)
command -v redis-cli >/dev/null || need+=(redis-tools)
command -v mariadbd >/dev/null || [[ -x /usr/sbin/mariadbd ]] || need+=(mariadb-server)
command -v mariadb-admin >/dev/null || need+=(mariadb-client)
command -v rabbitmq-server >/dev/null || [[ -x /usr/sbin/rabbitmq-server ]] || need+=(rabbitmq-server)
command -v chromium >/dev/null || command -v chromium-browser >/dev/null || need+=(chromium)
command -v wrk >/dev/null || need+=(wrk) # the benchmark suite's outside load generator
command -v promtool >/dev/null || need+=(prometheus) # promtool tests the alert rules; the dashboard test runs a Prometheus
command -v docker-compose >/dev/null || need+=(docker-compose) # only to check docker-compose.yml parses (no engine runs here)
command -v npm >/dev/null || need+=(npm) # fetches axe-core, which the browser tests run in each page
fc-list :lang=zh 2>/dev/null | grep -q . || need+=(fonts-wqy-zenhei) # the pages in Chinese, as the screenshots show them
if ((${#need[@]})); then
  if [[ $(id -u) -ne 0 ]] || ! command -v apt-get >/dev/null; then
    cat >&2 <<MSG
The test suite needs, on loopback at their default ports:
  Redis 7 (127.0.0.1:6379), RabbitMQ 3 (127.0.0.1:5672, guest/guest),
  MariaDB 10.11 or MySQL 8 (127.0.0.1:3306, root with an empty password),
  Chromium for the browser tests, wrk for make bench, Prometheus (promtool)
  for the alert and dashboard tests, docker-compose to check the compose file.
Missing here: ${need[*]}.
On Debian/Ubuntu run this as root (it installs them):  sudo make test
Elsewhere install them with your package manager, or run
  docker compose up -d
and set SECKILL_CHROMIUM to a Chromium or Chrome binary.
MSG
    exit 1
  fi
  log "installing ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q --no-install-recommends "${need[@]}"
fi

# stripe-mock (Stripe's API for the payment tests, started by them on a
# loopback port) comes from the Go module proxy.
if ! command -v stripe-mock >/dev/null; then
  log "installing stripe-mock"
  GOBIN=/usr/local/bin go install github.com/stripe/stripe-mock@v0.203.0 2>/dev/null ||
    go install github.com/stripe/stripe-mock@v0.203.0
fi

# axe-core (the accessibility checker the browser tests inject into each
# page) comes from npm, into .cache/ of the checkout (git-ignored).
axe_dir="$(cd "$(dirname "$0")/.." && pwd)/.cache/npm"
if [[ ! -f $axe_dir/node_modules/axe-core/axe.min.js ]]; then
  log "installing axe-core"
  npm install --silent --no-audit --no-fund --prefix "$axe_dir" axe-core@4.14.1 >/dev/null
fi

if ! redis-cli -h 127.0.0.1 -p 6379 ping 2>/dev/null | grep -q PONG; then
  log "starting Redis"
  mkdir -p /var/lib/redis /var/log/redis
  redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no \
    --dir /var/lib/redis --logfile /var/log/redis/ci.log
  wait_for Redis 30 redis-cli -h 127.0.0.1 -p 6379 ping
fi

if ! mariadb-admin -uroot -h 127.0.0.1 ping >/dev/null 2>&1; then
  log "starting MariaDB"
  mkdir -p /run/mysqld && chown mysql:mysql /run/mysqld 2>/dev/null || true
  start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd
  wait_for MariaDB 60 mariadb-admin -uroot -h 127.0.0.1 ping
fi

if ! port_open 5672; then
  log "starting RabbitMQ"
  rabbitmq-server -detached
  wait_for RabbitMQ 120 port_open 5672
  rabbitmqctl -q await_startup >/dev/null 2>&1 || true
fi

log "services up: redis $(redis-cli -h 127.0.0.1 info server | grep -m1 redis_version | tr -d '\r'), $(mariadb -uroot -h 127.0.0.1 -N -e 'select version()'), rabbitmq on :5672"
