#!/usr/bin/env bash
# bare_debian_check.sh: does the README's promise hold on a bare Debian 12?
#
# README, "The two commands": on a fresh Debian 12 machine (root, package mirrors, Rust via
# rustup, nothing else: not even git or make)
#   ./setup.sh && cargo nextest run                                 (--mode test, the default)
#   ./setup.sh && cargo run --release -- matrix --profiles all      (--mode main)
# This script builds such a machine as a chroot and runs one of the two commands in it:
#   1. a Debian 12 (bookworm) root from `debootstrap --variant=minbase`, from the mirror the
#      host's apt uses, with the host's suites (bookworm, bookworm-updates, bookworm-security);
#      bootstrapped once into a pristine tarball (STATE/root.minbase.tar), the root itself is
#      laid anew from it on every run (unless --reuse-root);
#   2. "Rust via rustup": the host's rustup (its default toolchain, settings, and the proxies in
#      ~/.cargo/bin), without cargo-nextest and without any crate registry or git cache;
#   3. the repository as `git archive HEAD` (no .git), or with --worktree the working tree
#      (no .git, no target/), unpacked fresh at /root/pagebench;
#   4. /proc, /sys, /dev, /dev/pts, /dev/shm bound in, a fresh tmpfs /run (ip netns' home) and
#      /tmp, the root bound onto itself so that `ip netns exec`'s mounts work, resolv.conf;
#      the command runs there with HOME=/root and a clean environment, under `nice -n 10`;
#   5. on exit, error or Ctrl-C: stops what it started (by process group id), reports and
#      removes network namespaces that appeared in the root's /run/netns during the run, reports
#      processes left in the root and namespaces or links that appeared on the host (never
#      touching those), and unmounts everything it mounted.
#
# Usage: bare_debian_check.sh [options] REPO
#   REPO                 the pagebench checkout (default: two levels above this script when it
#                        lives in REPO/results/scripts)
#   --mode test|main     test: ./setup.sh && cargo nextest run [NEXTEST_ARGS] (default)
#                        main: ./setup.sh && cargo run --release -- MAIN_JOB_ARGS
#   --main-job-args 'A'  default 'matrix --profiles all' (the README's command); e.g.
#                        'matrix --profiles wired --workloads page10 --protocols h2,h3 --runs 3'
#   --nextest-args 'A'   extra arguments for cargo nextest run (default: none, the README's)
#   --worktree           also take the uncommitted working tree (tar without .git and target/)
#   --state-dir DIR      default /var/tmp/pagebench-bare-debian: logs/, out/ and the pristine tarball
#   --root DIR           the root (default STATE/root)
#   --reuse-root         keep the root of the previous run as it is (its packages, crates,
#                        cargo-nextest and /root/pagebench/target): quicker, but proves nothing
#                        about a bare machine; the repository is still laid anew
#   --rebootstrap        debootstrap again even if the pristine tarball exists
#   --all-toolchains     copy every rustup toolchain, not only the default one
#   --no-host-ca         do not hand the host's extra CA certificates to the root (see below)
#   --log FILE           default STATE/logs/MODE-TIMESTAMP.log
#   --prepare-only       build the root, check it is bare, test ip netns inside, stop there
#
# Extra CA certificates: where the host trusts certificates of its own (a TLS-intercepting
# egress proxy: regular files in /etc/ssl/certs beside the symlinks, or files in
# /usr/local/share/ca-certificates), they are put in the root's /usr/local/share/ca-certificates,
# so that Debian's ca-certificates package, when setup.sh installs it, trusts them too. A machine
# with a direct connection needs none of it; nothing else of the host's configuration goes in.
#
# Exit code: that of the command in the root (setup.sh's when it failed); 4 when it was 0 but
# processes, namespaces or mounts were left behind; 2 on a usage error; 1 when the check itself
# could not run; 130 when interrupted.
set -euo pipefail

script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
mode=test
main_job_args='matrix --profiles all'
nextest_args=''
worktree=false
state_dir=/var/tmp/pagebench-bare-debian
root=''
reuse_root=false
rebootstrap=false
all_toolchains=false
host_ca=true
log=''
prepare_only=false
repo=''
suite=bookworm

usage() { sed -n '/^# Usage:/,/^# Exit code/p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
    --mode) mode="${2:?}"; shift 2 ;;
    --main-job-args) main_job_args="${2?}"; shift 2 ;;
    --nextest-args) nextest_args="${2?}"; shift 2 ;;
    --worktree) worktree=true; shift ;;
    --state-dir) state_dir="${2:?}"; shift 2 ;;
    --root) root="${2:?}"; shift 2 ;;
    --reuse-root) reuse_root=true; shift ;;
    --rebootstrap) rebootstrap=true; shift ;;
    --all-toolchains) all_toolchains=true; shift ;;
    --no-host-ca) host_ca=false; shift ;;
    --log) log="${2:?}"; shift 2 ;;
    --prepare-only) prepare_only=true; shift ;;
    -h|--help) usage ;;
    -*) echo "bare_debian_check: unknown option $1" >&2; usage ;;
    *) [ -z "$repo" ] || usage; repo="$1"; shift ;;
  esac
done
case "$mode" in test|main) ;; *) echo "bare_debian_check: --mode test or main" >&2; exit 2 ;; esac
if [ -z "$repo" ] && [ "$(basename "$script_dir")" = scripts ] && [ -f "$script_dir/../../Cargo.toml" ]; then
  repo="$script_dir/../.."
fi
[ -n "$repo" ] || { echo "bare_debian_check: name the repository directory" >&2; usage; }
repo="$(cd "$repo" && pwd)"
[ -f "$repo/setup.sh" ] || { echo "bare_debian_check: $repo has no setup.sh" >&2; exit 2; }
[ "$(id -u)" -eq 0 ] || { echo "bare_debian_check: run as root" >&2; exit 1; }
mkdir -p "$state_dir"
state_dir="$(cd "$state_dir" && pwd)"
[ -n "$root" ] || root="$state_dir/root"
mkdir -p "$(dirname "$root")"
root="$(cd "$(dirname "$root")" && pwd)/$(basename "$root")"
case "$root" in /|/root|/work|/tmp|/var|/usr|/etc|"$repo"|"$repo"/*) echo "bare_debian_check: refusing root $root" >&2; exit 2 ;; esac
base_tar="$state_dir/$(basename "$root").minbase.tar"
stamp="$(date -u +%Y%m%dT%H%M%SZ)"
[ -n "$log" ] || log="$state_dir/logs/$mode-$stamp.log"
mkdir -p "$(dirname "$log")" "$state_dir/out"

# One run per root at a time.
exec 8>"$root.lock"
flock -n 8 || { echo "bare_debian_check: another run holds $root.lock" >&2; exit 1; }

# Everything from here on goes to the log too.
# tee ignores Ctrl-C and TERM, so that it is there to log the cleanup they start.
exec > >(trap '' INT TERM HUP; exec tee -a "$log") 2>&1
say() { printf '[bare_debian_check %s] %s\n' "$(date -u +%H:%M:%S)" "$*"; }
die() { say "ERROR: $*"; exit 1; }
t_start=$(date +%s)
say "log: $log"
say "mode: $mode; repository: $repo; root: $root"

# ---------------------------------------------------------------------------------------------
# The host's apt sources: "URI SUITE COMPONENTS" per line, deb822 and one-line formats.
host_sources() {
  local f
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    awk '
      function flush() {
        if (types ~ /(^| )deb( |$)/ && enabled != "no")
          for (i = 1; i <= nu; i++) for (j = 1; j <= ns; j++) print u[i], s[j], comps
        types = ""; enabled = ""; comps = ""; nu = 0; ns = 0
      }
      /^[ \t]*#/ { next }
      /^[ \t]*$/ { flush(); next }
      {
        key = tolower($1); sub(/:$/, "", key); val = $0; sub(/^[^:]*:[ \t]*/, "", val)
        if (key == "types") types = val
        else if (key == "enabled") enabled = tolower(val)
        else if (key == "uris") nu = split(val, u, /[ \t]+/)
        else if (key == "suites") ns = split(val, s, /[ \t]+/)
        else if (key == "components") comps = val
      }
      END { flush() }' "$f"
  done
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -f "$f" ] || continue
    sed -e 's/#.*//' -e 's/\[[^]]*\]//' "$f" | awk '$1 == "deb" && NF >= 3 { c = ""; for (i = 4; i <= NF; i++) c = c (c ? " " : "") $i; print $2, $3, c }'
  done
}
host_codename="$(. /etc/os-release && echo "${VERSION_CODENAME:-$suite}")"
sources="$(host_sources)"
# The host's lines for its own release, with its codename mapped to bookworm's.
mirror_for() { # $1: suite suffix ("", -updates, -security)
  awk -v want="$host_codename$1" '$2 == want { print $1; exit }' <<<"$sources"
}
components_for() {
  awk -v want="$host_codename$1" '$2 == want { $1 = ""; $2 = ""; sub(/^ +/, ""); print; exit }' <<<"$sources"
}
mirror="$(mirror_for '')"
[ -n "$mirror" ] || die "the host's apt sources have no $host_codename line to take the mirror from"
components="$(components_for '')"; components="${components:-main}"
updates_mirror="$(mirror_for -updates)"
security_mirror="$(mirror_for -security)"
say "mirror from the host's apt sources: $mirror ($suite${updates_mirror:+, $suite-updates}${security_mirror:+, $suite-security})"

# ---------------------------------------------------------------------------------------------
# Cleanup: always, once.
mounted=()          # what this run mounted, in order
mounts_baseline=''  # everything under the root once this run had mounted its own
child_pid=''
leftovers=0
host_netns_before="$(ip netns list 2>/dev/null | awk '{print $1}' | sort || true)"
host_links_before="$(ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | sed 's/@.*//' | sort || true)"
cleaned=false

pids_in_root() { # processes whose root directory is this root
  local p r
  for p in /proc/[0-9]*; do
    r="$(readlink "$p/root" 2>/dev/null)" || continue
    if [ "$r" = "$root" ]; then echo "${p#/proc/}"; fi
  done
}
mounts_under_root() { # deepest first
  findmnt -rn -o TARGET 2>/dev/null | awk -v r="$root" '$0 == r || index($0, r "/") == 1' \
    | awk '{ print length($0), $0 }' | sort -rn | cut -d' ' -f2-
}
cleanup() {
  local rc=$? p pids m ns
  $cleaned && return
  cleaned=true
  set +e
  trap - EXIT
  trap '' INT TERM HUP PIPE   # a second Ctrl-C must not cut the cleanup short
  if [ -n "$child_pid" ] && kill -0 -- "-$child_pid" 2>/dev/null; then
    say "stopping the run in the root (process group $child_pid)"
    kill -TERM -- "-$child_pid" 2>/dev/null
    for _ in $(seq 1 30); do kill -0 -- "-$child_pid" 2>/dev/null || break; sleep 1; done
    kill -KILL -- "-$child_pid" 2>/dev/null
  fi
  # Processes still running in the root were started by this run (nothing else runs there).
  pids="$(pids_in_root | tr '\n' ' ')"
  if [ -n "${pids// /}" ]; then
    say "FINDING: processes left running in the root after the command ended:"
    for p in $pids; do printf '    %s %s\n' "$p" "$(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | cut -c1-200)"; done
    leftovers=1
    for p in $pids; do kill -TERM "$p" 2>/dev/null; done
    sleep 3
    for p in $(pids_in_root); do kill -KILL "$p" 2>/dev/null; done
    sleep 1
  fi
  # Network namespaces the run left in the root's /run/netns (a tmpfs of this run: all of its
  # entries appeared during it). The probe's own are gone by now.
  if [ -d "$root/run/netns" ]; then
    for ns in "$root"/run/netns/*; do
      [ -e "$ns" ] || continue
      say "FINDING: network namespace left behind: $(basename "$ns") (deleting it: it appeared during this run)"
      leftovers=1
      umount "$ns" 2>/dev/null || umount -l "$ns" 2>/dev/null
      rm -f "$ns"
    done
  fi
  # The host's namespaces and links: reported, never touched (another user of the machine may own them).
  local after new
  after="$(ip netns list 2>/dev/null | awk '{print $1}' | sort || true)"
  new="$(comm -13 <(echo "$host_netns_before") <(echo "$after") | grep . || true)"
  if [ -n "$new" ]; then
    say "NOTE: network namespaces appeared on the host during the run (not this run's /run; left alone): $(echo $new)"
  fi
  after="$(ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | sed 's/@.*//' | sort || true)"
  new="$(comm -13 <(echo "$host_links_before") <(echo "$after") | grep . || true)"
  if [ -n "$new" ]; then
    say "FINDING?: network links appeared in the host's namespace during the run (left alone; may be another user's): $(echo $new)"
  fi
  # Mounts: anything still mounted under the root beyond what this run mounted is a leftover.
  local extra
  extra="$(comm -13 <(echo "$mounts_baseline" | sort) <(mounts_under_root | sort) | grep . || true)"
  # `ip netns add` binds /run/netns onto itself (shared) and keeps it: iproute2's way, and this
  # script's own probe made it first. Only mounts beyond that one are the run's leftovers.
  if echo "$extra" | grep -qxF "$root/run/netns"; then
    say "note: /run/netns is bound onto itself (iproute2 does that on the first ip netns add; not a leftover)"
    extra="$(echo "$extra" | grep -vxF "$root/run/netns" || true)"
  fi
  if [ -n "$extra" ]; then
    say "FINDING: mounts left under the root by the run: $(echo $extra)"
    leftovers=1
  fi
  for m in $(mounts_under_root); do
    umount "$m" 2>/dev/null || { sleep 1; umount "$m" 2>/dev/null; } || {
      say "could not unmount $m normally: lazily"; umount -l "$m" 2>/dev/null; }
  done
  if [ -n "$(mounts_under_root)" ]; then
    say "ERROR: still mounted under the root: $(mounts_under_root | tr '\n' ' ')"
    [ "$rc" -ne 0 ] || rc=1
  else
    say "unmounted everything under $root"
  fi
  local t_end=$(date +%s)
  say "total wall time: $(( (t_end - t_start) / 60 )) min $(( (t_end - t_start) % 60 )) s"
  if [ "$rc" -eq 0 ] && [ "$leftovers" -ne 0 ]; then rc=4; fi
  say "exit code of bare_debian_check: $rc"
  exit "$rc"
}
trap cleanup EXIT
trap 'say "interrupted"; exit 130' INT
trap 'say "terminated"; exit 143' TERM
trap 'say "hung up"; exit 129' HUP

mnt() { # mnt TARGET mount-args...: mount and remember
  local target="$1"; shift
  mount "$@" "$target"
  mounted+=("$target")
  mounts_baseline="$(mounts_under_root)"
}

# ---------------------------------------------------------------------------------------------
# 1. The pristine minbase root, once.
if ! command -v debootstrap >/dev/null 2>&1; then
  say "installing debootstrap on the host"
  DEBIAN_FRONTEND=noninteractive apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
fi
if [ -n "$(mounts_under_root)" ]; then
  die "something is mounted under $root (a run still going, or one that could not clean up): $(mounts_under_root | tr '\n' ' ')"
fi
if $rebootstrap || [ ! -s "$base_tar" ]; then
  say "debootstrap --variant=minbase $suite into $root.bootstrap (a few minutes)"
  rm -rf --one-file-system "$root.bootstrap"
  debootstrap --variant=minbase "$suite" "$root.bootstrap" "$mirror" >"$state_dir/logs/debootstrap-$stamp.log" 2>&1 \
    || die "debootstrap failed: see $state_dir/logs/debootstrap-$stamp.log"
  # The apt sources a Debian 12 installation has: the host's suites, from the host's mirrors.
  rm -f "$root.bootstrap/etc/apt/sources.list"
  {
    printf 'Types: deb\nURIs: %s\nSuites: %s%s\nComponents: %s\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
      "$mirror" "$suite" "${updates_mirror:+ $suite-updates}" "$components"
    if [ -n "$updates_mirror" ] && [ "$updates_mirror" != "$mirror" ]; then
      die "the host takes $host_codename-updates from another mirror than $host_codename: not handled"
    fi
    if [ -n "$security_mirror" ]; then
      printf '\nTypes: deb\nURIs: %s\nSuites: %s-security\nComponents: %s\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
        "$security_mirror" "$suite" "$(c="$(components_for -security)"; echo "${c:-main}")"
    fi
  } >"$root.bootstrap/etc/apt/sources.list.d/debian.sources"
  # A Debian installation has these two; a minbase debootstrap may not.
  [ -s "$root.bootstrap/etc/hosts" ] || printf '127.0.0.1\tlocalhost\n::1\t\tlocalhost ip6-localhost ip6-loopback\n' >"$root.bootstrap/etc/hosts"
  [ -s "$root.bootstrap/etc/hostname" ] || echo bare-debian >"$root.bootstrap/etc/hostname"
  apt_clean="$root.bootstrap/var/cache/apt/archives"
  find "$apt_clean" -maxdepth 1 -name '*.deb' -delete
  tar -C "$root.bootstrap" -cf "$base_tar.part" . && mv "$base_tar.part" "$base_tar"
  rm -rf --one-file-system "$root.bootstrap"
  say "pristine root kept as $base_tar"
else
  say "reusing the pristine root $base_tar"
fi

# 2. The root of this run.
if $reuse_root && [ -d "$root/usr" ]; then
  say "WARNING: --reuse-root: the root keeps what earlier runs installed; this run proves nothing about a bare machine"
else
  reuse_root=false
  say "laying the root anew from $base_tar"
  rm -rf --one-file-system "$root"
  mkdir -p "$root"
  tar -C "$root" -xf "$base_tar"
fi
cp -L /etc/resolv.conf "$root/etc/resolv.conf"

# Rust via rustup, as a fresh machine has it: rustup, its settings, the default toolchain (and
# names linked to it), the proxies; no cargo-nextest, no registry, no git checkouts.
if ! $reuse_root; then
  [ -x /root/.cargo/bin/rustup ] || die "the host has no /root/.cargo/bin/rustup to copy"
  mkdir -p "$root/root/.cargo/bin" "$root/root/.rustup/toolchains"
  default_tc="$(awk -F'"' '/^default_toolchain/ { print $2 }' /root/.rustup/settings.toml)"
  [ -n "$default_tc" ] && [ -d "/root/.rustup/toolchains/$default_tc" ] || die "no default toolchain in /root/.rustup"
  cp -a /root/.rustup/settings.toml "$root/root/.rustup/"
  [ -d /root/.rustup/update-hashes ] && cp -a /root/.rustup/update-hashes "$root/root/.rustup/"
  mkdir -p "$root/root/.rustup/downloads" "$root/root/.rustup/tmp"
  for tc in /root/.rustup/toolchains/*; do
    name="$(basename "$tc")"
    if [ -L "$tc" ]; then
      cp -a "$tc" "$root/root/.rustup/toolchains/"   # e.g. 1.95.0-… -> stable-…
    elif $all_toolchains || [ "$name" = "$default_tc" ]; then
      cp -a "$tc" "$root/root/.rustup/toolchains/"
    fi
  done
  cp -a /root/.cargo/bin/rustup "$root/root/.cargo/bin/"
  for f in /root/.cargo/bin/*; do
    if [ -L "$f" ] && [ "$(readlink "$f")" = rustup ]; then cp -a "$f" "$root/root/.cargo/bin/"; fi
  done
  [ -f /root/.cargo/env ] && cp -a /root/.cargo/env "$root/root/.cargo/"
  # A login shell finds cargo on a machine with rustup (rustup-init writes this to .profile).
  grep -q cargo/env "$root/root/.profile" 2>/dev/null || echo '. "$HOME/.cargo/env"' >>"$root/root/.profile"
fi
if $host_ca && ! $reuse_root; then
  mkdir -p "$root/usr/local/share/ca-certificates/host"
  for c in /usr/local/share/ca-certificates/*.crt /usr/local/share/ca-certificates/*/*.crt; do
    [ -f "$c" ] || continue
    cp "$c" "$root/usr/local/share/ca-certificates/host/$(basename "$c")"
  done
  for c in /etc/ssl/certs/*.pem; do
    [ -f "$c" ] && [ ! -L "$c" ] || continue
    case "$(basename "$c")" in ssl-cert-snakeoil.pem) continue ;; esac
    grep -q 'BEGIN CERTIFICATE' "$c" || continue
    cp "$c" "$root/usr/local/share/ca-certificates/host/$(basename "$c" .pem).crt"
  done
  say "host's extra CA certificates handed to the root (trusted once setup.sh installs ca-certificates): $(ls "$root/usr/local/share/ca-certificates/host" | tr '\n' ' ')"
fi

# 3. The repository, fresh.
commit="$(git -C "$repo" rev-parse HEAD 2>/dev/null || echo unknown)"
dest="$root/root/pagebench"
if $reuse_root && [ -d "$dest/target" ]; then
  rm -rf --one-file-system "$root/root/pagebench.target"
  mv "$dest/target" "$root/root/pagebench.target"
fi
rm -rf --one-file-system "$dest"
mkdir -p "$dest"
if $worktree; then
  say "repository: the working tree of $repo (HEAD $commit, uncommitted changes included, no .git, no target/)"
  git -C "$repo" status --short 2>/dev/null | sed 's/^/    /' | head -50
  tar -C "$repo" --exclude=./target --exclude=./.git -cf - . | tar -C "$dest" -xf -
else
  say "repository: git archive HEAD of $repo ($commit)"
  git -C "$repo" archive --format=tar HEAD | tar -C "$dest" -xf -
fi
if [ -d "$root/root/pagebench.target" ]; then mv "$root/root/pagebench.target" "$dest/target"; fi
[ ! -e "$dest/.git" ] || die "the copy has a .git"

# 4. Into the root.
mnt "$root" --bind "$root"            # `ip netns exec` makes / a slave: / must be a mount point
mount --make-private "$root"
mnt "$root/proc" --rbind /proc;       mount --make-rslave "$root/proc"
mnt "$root/sys" --rbind /sys;         mount --make-rslave "$root/sys"
mnt "$root/dev" --bind /dev;          mount --make-private "$root/dev"
mkdir -p "$root/dev/pts" "$root/dev/shm"
mnt "$root/dev/pts" --bind /dev/pts;  mount --make-private "$root/dev/pts"
mnt "$root/dev/shm" --bind /dev/shm;  mount --make-private "$root/dev/shm"
mnt "$root/run" -t tmpfs -o mode=0755,nosuid,nodev tmpfs
mkdir -p "$root/run/lock" && chmod 1777 "$root/run/lock"
mnt "$root/tmp" -t tmpfs -o mode=1777,nosuid,nodev tmpfs
# On exit the findmnt listing unmounts the submounts of the recursive binds too.

path=/root/.cargo/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
in_root() { # in_root CMD...: a clean root login environment
  chroot "$root" /usr/bin/env -i HOME=/root USER=root LOGNAME=root SHELL=/bin/bash TERM=dumb \
    PATH="$path" CARGO_TERM_COLOR=never "$@"
}

say "before setup.sh: which git make cc gcc (must find nothing)"
in_root /bin/sh -c 'command -v which' >/dev/null || die "the root has no which (debianutils)"
found="$(in_root /bin/sh -c 'which git make cc gcc; for c in git make cc gcc; do command -v $c; done' | sort -u || true)"
if [ -n "$found" ]; then
  echo "$found" | sed 's/^/    found: /'
  $reuse_root || die "the root is not bare: $(echo $found)"
else
  echo "    found nothing"
fi
say "before setup.sh: rustup, cargo, rustc in the root; no cargo-nextest, no crate cache"
in_root /bin/sh -c 'rustup --version 2>/dev/null | head -1; cargo --version; rustc --version; rustup component list --installed 2>/dev/null | tr "\n" " "; echo' | sed 's/^/    /'
if in_root /bin/sh -c 'cargo nextest --version' >/dev/null 2>&1; then
  $reuse_root || die "cargo-nextest is already in the root"
  echo "    cargo-nextest: present (reused root)"
else
  echo "    cargo-nextest: absent"
fi
ls -d "$root/root/.cargo/registry" "$root/root/.cargo/git" 2>/dev/null | sed 's/^/    present: /' || true
$reuse_root || [ ! -e "$root/root/.cargo/registry" ] || die "the root has a crate registry cache"
echo "    crate registry and git caches: $( [ -e "$root/root/.cargo/registry" ] && echo present || echo absent)"

say "ip netns' mechanism in the root (util-linux: a namespace bound at /run/netns/NAME, entered, removed)"
probe=bdcprobe$$
in_root /bin/sh -ec "
  mkdir -p /run/netns
  touch /run/netns/$probe
  unshare --net=/run/netns/$probe true
  nsenter --net=/run/netns/$probe true
  nsenter --net=/run/netns/$probe unshare --mount --propagation slave sh -ec 'umount -l /sys; mount -t sysfs sysfs /sys; ls /sys/class/net | grep -qx lo'
  umount /run/netns/$probe && rm /run/netns/$probe
  echo '    bound, entered (with a private /sys remount as ip netns exec does), removed: ok'
" || die "network namespaces cannot be bound inside the root"

# The command, and a probe with ip netns itself once setup.sh has installed iproute2.
inner="$root/root/bdc-inner.sh"
{
  echo '#!/bin/bash'
  echo 'set -u'
  printf 'mode=%q\nmain_job_args=%q\nnextest_args=%q\nprobe=%q\n' "$mode" "$main_job_args" "$nextest_args" "$probe"
  cat <<'INNER'
cd /root/pagebench || exit 90
mkdir -p /root/bdc
t0=$(date +%s)
echo "[inner] + ./setup.sh"
./setup.sh
rc=$?
t1=$(date +%s)
echo "$rc" >/root/bdc/setup.rc
echo "$((t1 - t0))" >/root/bdc/setup.secs
echo "[inner] setup.sh exit code $rc after $((t1 - t0)) s"
[ "$rc" -eq 0 ] || exit "$rc"
echo "[inner] which git make cc gcc after setup.sh: $(which git make cc gcc | tr '\n' ' ')"
echo "[inner] ip netns probe: add, exec, delete"
if ip netns add "$probe" && ip netns exec "$probe" ip -o link show lo >/dev/null && ip netns delete "$probe"; then
  echo "[inner] ip netns probe: ok"
else
  echo "[inner] ip netns probe: FAILED"
  ip netns delete "$probe" 2>/dev/null
  exit 91
fi
echo "[inner] ip netns list before the command: $(ip netns list | tr '\n' ' ')"
t2=$(date +%s)
if [ "$mode" = test ]; then
  eval "set -- $nextest_args"
  echo "[inner] + cargo nextest run $*"
  cargo nextest run "$@"
  rc=$?
else
  eval "set -- $main_job_args"
  echo "[inner] + cargo run --release -- $*"
  cargo run --release -- "$@"
  rc=$?
fi
t3=$(date +%s)
echo "$rc" >/root/bdc/cmd.rc
echo "$((t3 - t2))" >/root/bdc/cmd.secs
echo "[inner] command exit code $rc after $((t3 - t2)) s"
echo "[inner] ip netns list after the command: $(ip netns list | tr '\n' ' ')"
exit "$rc"
INNER
} >"$inner"
chmod +x "$inner"

if $prepare_only; then
  say "--prepare-only: the root is ready; not running setup.sh"
  exit 0
fi

if [ "$mode" = test ]; then
  say "running in the root: cd /root/pagebench && ./setup.sh && cargo nextest run $nextest_args  (nice -n 10)"
else
  say "running in the root: cd /root/pagebench && ./setup.sh && cargo run --release -- $main_job_args  (nice -n 10)"
fi
t_cmd=$(date +%s)
# Its own session and process group (setsid without a fork: the group's id is $!), so that it
# and everything it starts can be stopped by that id.
setsid nice -n 10 chroot "$root" /usr/bin/env -i HOME=/root USER=root LOGNAME=root SHELL=/bin/bash \
  TERM=dumb PATH="$path" CARGO_TERM_COLOR=never /bin/bash /root/bdc-inner.sh </dev/null &
child_pid=$!
set +e
wait "$child_pid"
rc=$?
set -e
child_pid_done=$child_pid
if ! kill -0 -- "-$child_pid" 2>/dev/null; then child_pid=''; fi
t_done=$(date +%s)
say "the command in the root ended with exit code $rc after $(( (t_done - t_cmd) / 60 )) min $(( (t_done - t_cmd) % 60 )) s"
# Anything left in its process group?
if kill -0 -- "-$child_pid_done" 2>/dev/null; then
  say "FINDING: processes of the run's process group still alive after it ended:"
  ps -o pid=,args= -g "$child_pid_done" 2>/dev/null | sed 's/^/    /' | cut -c1-200
  leftovers=1
fi

setup_rc="$(cat "$root/root/bdc/setup.rc" 2>/dev/null || echo '?')"
setup_secs="$(cat "$root/root/bdc/setup.secs" 2>/dev/null || echo '?')"
cmd_rc="$(cat "$root/root/bdc/cmd.rc" 2>/dev/null || echo '-')"
cmd_secs="$(cat "$root/root/bdc/cmd.secs" 2>/dev/null || echo '-')"
say "RESULT: setup.sh exit code $setup_rc ($setup_secs s); command exit code $cmd_rc ($cmd_secs s); overall $rc"
if [ "$mode" = test ]; then
  summary="$(grep -E '^ *Summary \[' "$log" | tail -1 | sed 's/^ *//')"
  say "nextest summary: ${summary:-none (nextest did not finish)}"
  fails="$(sed -n '/^ *Summary \[/,$p' "$log" | grep -E '^ +(FAIL|SIGSEGV|SIGABRT|SIGKILL|TIMEOUT|LEAK|ABORT)' | sed 's/^ *//' | sort -u || true)"
  if [ -n "$fails" ]; then say "failing tests:"; echo "$fails" | sed 's/^/    /'; fi
else
  newest=''
  for d in $(ls -1dt "$dest"/results/*/ 2>/dev/null); do
    if [ "$(stat -c %Y "$d")" -ge "$t_cmd" ]; then newest="${d%/}"; break; fi
  done
  if [ -n "$newest" ] && [ -f "$newest/report.md" ]; then
    out="$state_dir/out/$stamp"
    mkdir -p "$out"
    cp -a "$newest" "$out/"
    say "report written: /root/pagebench/results/$(basename "$newest")/report.md (copied to $out/$(basename "$newest"))"
  else
    say "no results/<timestamp>/report.md written by this run${newest:+ (newest results directory: $newest)}"
  fi
fi
exit "$rc"
