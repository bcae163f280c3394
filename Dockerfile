# The seckill binary in a minimal image: built with the Makefile's own
# build step (web assets, migrations and default configuration embedded as
# in any build), static (no cgo: the SQLite driver is pure Go), run as a
# non-root user. docker-compose.yml runs it as two `serve`, a `worker` and
# a one-off `migrate`. (Not built on the project's CI machine, which has no
# container engine: a test checks the file's build steps are the
# Makefile's.)
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 make build

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /src/bin/seckill /usr/local/bin/seckill
USER nonroot:nonroot
# The API and pages; the ops listener (metrics, health, pprof).
EXPOSE 8080 9091
ENTRYPOINT ["/usr/local/bin/seckill"]
CMD ["all"]
