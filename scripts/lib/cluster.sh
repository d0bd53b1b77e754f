# Sourced by scripts/ha and scripts/hosts, which run throw-away clusters of their own.
# Needs $root (the checkout) and a die() function.

# PostgreSQL refuses to run as root; as root, the clusters run as the 'postgres' system
# user (as in scripts/pg).
as_owner() {
  if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

# A fresh, empty folder the cluster's owner can write to: under the checkout when the
# owner can enter it, else a private folder under /var/tmp that the folder links to.
fresh_dir() {
  local dir=$1 name=$2
  if [ -L "$dir" ]; then
    local target
    target=$(readlink "$dir")
    rm -rf -- "$target" "$dir"
  elif [ -e "$dir" ]; then
    rm -rf -- "$dir"
  fi
  mkdir -p "$dir"
  chmod 700 "$dir"
  if [ "$(id -u)" -eq 0 ]; then
    id postgres >/dev/null 2>&1 || die "system user 'postgres' missing (scripts/install-deps)"
    chown postgres:postgres "$dir"
    if ! runuser -u postgres -- test -w "$dir"; then
      rmdir "$dir"
      local alt
      alt="/var/tmp/awa-pg-$(echo -n "$root" | md5sum | cut -c1-12)-$name"
      rm -rf -- "$alt"
      mkdir -p "$alt"
      chown postgres:postgres "$alt"
      chmod 700 "$alt"
      ln -s "$alt" "$dir"
    fi
  fi
}
