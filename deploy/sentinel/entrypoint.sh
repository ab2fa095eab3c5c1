#!/bin/sh
# Starts a sentinel from its own (rewritable) copy of deploy/sentinel/sentinel.conf,
# announcing its service name ($1) to the other sentinels.
set -eu
if [ ! -s /data/sentinel.conf ]; then
    cp /etc/redis/sentinel.conf /data/sentinel.conf
fi
exec redis-server /data/sentinel.conf --sentinel --sentinel announce-ip "$1"
