# crux in a container: a static binary on a minimal base, running as a
# non-root user, with its data directory on the volume /data.
#
#   docker build -t crux .
#   docker run --rm -i -v crux-data:/data crux                  # MCP over stdio
#   docker run --rm -p 8080:8080 -v crux-data:/data \
#     -e CRUX_AGENT_TOKENS="$(cat tokens)" crux \
#     serve --http 0.0.0.0:8080 --allow-remote                 # MCP over HTTP
#
# Build arguments: VERSION (what crux version prints) and REVISION.

FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=devel
ARG REVISION=
RUN CGO_ENABLED=0 go build -trimpath \
      -ldflags "-s -w -X main.version=${VERSION} -X main.revision=${REVISION}" \
      -o /out/crux ./cmd/crux \
 && mkdir -p /out/data

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/crux /usr/local/bin/crux
# The data directory, owned by the image's non-root user (65532).
COPY --from=build --chown=65532:65532 /out/data /data
ENV CRUX_DATA_DIR=/data
VOLUME /data
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/crux"]
CMD ["serve"]
