#!/bin/sh
# Writes PgBouncer's user list from the environment, then runs PgBouncer in the foreground.
# The password lives only in the environment and in this tmpfs file, readable by PgBouncer.
set -eu
: "${KOINON_APP_PASSWORD:?set KOINON_APP_PASSWORD}"
umask 077
mkdir -p /run/pgbouncer
# auth_file format: "user" "password", a double quote inside doubled.
escaped=$(printf '%s' "$KOINON_APP_PASSWORD" | sed 's/"/""/g')
printf '"%s" "%s"\n' koinon_app "$escaped" > /run/pgbouncer/userlist.txt
exec pgbouncer /etc/pgbouncer/pgbouncer.ini
