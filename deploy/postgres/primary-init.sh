#!/bin/sh
# Runs once, when the primary's data directory is created (docker-entrypoint-initdb.d):
# the extensions (they need a superuser), the runtime role that owns nothing and the
# replication role, and the replica's entry in pg_hba.conf. Passwords come from the
# environment only. The runtime role's grants follow every migration
# (deploy/postgres/grant-runtime-role.sql, run by the `migrate` service).
set -eu
: "${KOINON_APP_PASSWORD:?set KOINON_APP_PASSWORD}"
: "${REPLICATION_PASSWORD:?set REPLICATION_PASSWORD}"

psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" \
    -v app_password="$KOINON_APP_PASSWORD" \
    -v replication_password="$REPLICATION_PASSWORD" <<'SQL'
CREATE EXTENSION IF NOT EXISTS vector;
CREATE EXTENSION IF NOT EXISTS pg_trgm;
CREATE ROLE koinon_app LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION
    PASSWORD :'app_password';
CREATE ROLE replicator LOGIN REPLICATION PASSWORD :'replication_password';
SQL

# The image's pg_hba.conf lets every role into every database with SCRAM from anywhere,
# but "all" does not cover replication connections: the replica needs its own line.
echo "host replication replicator all scram-sha-256" >> "$PGDATA/pg_hba.conf"
