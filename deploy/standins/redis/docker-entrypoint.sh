#!/usr/bin/env bash
# The stand-in Redis's entrypoint: as the official image's, it runs redis-server (also when the first
# argument is an option or a .conf file) as the user redis, taking /data for it first when started as root;
# any other command runs as given. Standard input passes through (`redis-server -` reads its configuration there).
set -euo pipefail
if [[ "${1:-}" == -* || "${1:-}" == *.conf ]]; then
  set -- redis-server "$@"
fi
if [[ "${1:-}" == "redis-server" && "$(id -u)" == "0" ]]; then
  find . \! -user redis -exec chown redis '{}' +
  exec gosu redis "$0" "$@"
fi
umask 0077
exec "$@"
