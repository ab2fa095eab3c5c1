#!/bin/sh
# The primary: gives the WAL archive's volume to `postgres` (a fresh volume is root's),
# then the image's own entrypoint (initdb and primary-init.sh on first start).
# Arguments: postgres and its flags.
set -eu
install -d -o postgres -g postgres -m 700 /archive
exec docker-entrypoint.sh "$@"
