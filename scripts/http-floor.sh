#!/usr/bin/env bash
# The seckill child's CPU per HTTP request under wrk -t1 -c64 (6 s each,
# twice): GET /healthz (net/http, the middleware and the kernel's socket
# calls: the floor under any route) against a sold-out buy (one user, a
# fresh request id each time, on a sale of one unit already bought). What
# BENCHMARKS.md ("Make an order cheaper") calls HTTP's share. Run after
# `make build`, alone on the machine: scripts/http-floor.sh [NAME=value ...]
set -euo pipefail
pfx=floor
. "$(dirname "$0")/child.sh"

now=$(date -u +%Y-%m-%dT%H:%M:%SZ) end=$(date -u -d '+1 hour' +%Y-%m-%dT%H:%M:%SZ)
sale=$(curl -sf -X POST "http://$http/admin/api/sales" -H "Authorization: Bearer $SECKILL_ADMIN_TOKEN" \
  -H 'Content-Type: application/json' \
  -d "{\"name\":\"floor\",\"item\":\"x\",\"price_cents\":100,\"total\":1,\"per_user_limit\":1,\"starts_at\":\"$now\",\"ends_at\":\"$end\"}" |
  python3 -c 'import json, sys; print(json.load(sys.stdin)["id"])')
tokens=$(mktemp)
"$bin" loadtest --url "http://$http" --sale "$sale" --users 2 -c 2 --duration 1s --tokens-out "$tokens" >/dev/null 2>&1
buy() { curl -s -X POST "http://$http/api/sales/$sale/buy" -H "Authorization: Bearer $1" -H 'Content-Type: application/json' -d "{\"qty\":1,\"request_id\":\"$2\"}"; }
buy "$(sed -n 1p "$tokens" | cut -d' ' -f1)" first-buy-1 >/dev/null # the one unit
buy "$(sed -n 2p "$tokens" | cut -d' ' -f1)" check-buy-1 | grep -q '"sold_out"' || { echo "http-floor: a buy is not refused as sold out" >&2; exit 1; }
script=$(mktemp --suffix=.lua)
cat >"$script" <<LUA
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer $(sed -n 2p "$tokens" | cut -d' ' -f1)"
n = 0
request = function()
  n = n + 1
  return wrk.format(nil, nil, nil, '{"qty":1,"request_id":"wrk-' .. n .. '-' .. math.random(1e9) .. '"}')
end
LUA
hz=$(getconf CLK_TCK)
for what in healthz buy healthz buy; do
  t0=$(self)
  if [[ $what == healthz ]]; then r=$(wrk -t1 -c64 -d6s "http://$http/healthz")
  else r=$(wrk -t1 -c64 -d6s -s "$script" "http://$http/api/sales/$sale/buy"); fi
  t1=$(self)
  n=$(grep -oE '[0-9]+ requests in' <<<"$r" | grep -oE '^[0-9]+')
  other=$(grep -oE 'Non-2xx or 3xx responses: [0-9]+' <<<"$r" || true) # every buy: sold out
  awk -v w="$what" -v n="$n" -v t=$((t1 - t0)) -v hz="$hz" -v x="$other" \
    'BEGIN { printf "%-8s %d requests, seckill %.1f µs of CPU per request %s\n", w, n, t * 1e6 / hz / n, x }'
done
rm -f "$tokens" "$script"
