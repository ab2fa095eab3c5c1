#!/bin/sh
# The streaming replica. On first start (an empty data directory) it copies the primary
# with pg_basebackup -R (which writes standby.signal and primary_conninfo) through a
# physical replication slot, so the primary keeps the WAL the replica has not received;
# afterwards it just starts. The image's own entrypoint then runs PostgreSQL as `postgres`
# (it skips initdb: the data directory is not empty). The WAL archive is shared with the
# primary: archiving starts here only if this standby is promoted. Arguments: postgres
# and its flags.
set -eu
: "${REPLICATION_PASSWORD:?set REPLICATION_PASSWORD}"
PRIMARY_HOST=${PRIMARY_HOST:-postgres-primary}
SLOT=${REPLICATION_SLOT:-replica_1}
export PGPASSWORD="$REPLICATION_PASSWORD"

install -d -o postgres -g postgres -m 700 "$PGDATA" /archive
if [ ! -s "$PGDATA/PG_VERSION" ]; then
    until gosu postgres pg_isready -h "$PRIMARY_HOST" -p 5432 -q; do
        echo "waiting for $PRIMARY_HOST"
        sleep 2
    done
    gosu postgres pg_receivewal -h "$PRIMARY_HOST" -U replicator \
        --create-slot --if-not-exists --slot "$SLOT"
    gosu postgres pg_basebackup -h "$PRIMARY_HOST" -U replicator -D "$PGDATA" \
        --write-recovery-conf --wal-method=stream --slot "$SLOT" \
        --checkpoint=fast --progress
fi
unset PGPASSWORD
exec docker-entrypoint.sh "$@"
