# Sourced by scripts/pg, scripts/pgbouncer and scripts/ha: is a 127.0.0.1 port taken?
#
# A port is taken when something listens on it, and also when a client connection uses it
# as its own local port: the ports these scripts use (54320..54399) lie inside Linux's
# ephemeral range (32768..60999), so during a busy test run any outgoing connection may hold
# one. Such a port refuses connections, yet a server cannot bind it, so connecting alone is
# not a sufficient test; `ss` (iproute2) lists every socket on it. A port can still be taken
# between this check and the bind, so callers that start servers retry on a bind failure.
port_in_use() {
  (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
  command -v ss >/dev/null 2>&1 || return 1
  [ -n "$(ss -Htan "( sport = :$1 )" 2>/dev/null)" ]
}
