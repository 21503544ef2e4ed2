#!/usr/bin/env bash
# Installs what pagebench needs on Debian 12 (as root), quietly and only when missing.
set -euo pipefail
if [ "$(id -u)" -ne 0 ]; then
  echo "setup.sh: run as root (pagebench creates network namespaces and TUN devices)" >&2
  exit 1
fi
# --runtime: only what a run needs (the container image, deploy/Containerfile): no build tools,
# no test tools, no Rust checks.
runtime_only=false
if [ "${1:-}" = "--runtime" ]; then
  runtime_only=true
fi
need=()
# gcc and libc6-dev: the linker cargo needs (a bare Debian has no cc); python3, util-linux and
# mount: programs the tests run (a web server through `pagebench shell`, unshare, setpriv,
# mount); iproute2: ip and ss; tshark: the capture tests decrypt the runs' pcaps with it;
# firefox-esr and libnss3-tools: the second engine and the tool that trusts the server's
# certificate in its profile; xvfb: the virtual display `--visual` records the browsers'
# windows on. Servers under test: apache2 and h2o (h1/h2); cmake, g++ and
# libclang-dev build quiche's vendored BoringSSL (--servers quiche), with make (cmake's
# generator) and git (boring-sys's build calls it; a bare Debian has neither); python3-venv
# holds aioquic (--servers aioquic) and kubernetes-validate.
for pkg in chromium firefox-esr libnss3-tools xvfb curl caddy nginx-light apache2 h2o iproute2 procps ca-certificates gcc g++ libc6-dev cmake make git libclang-dev python3 python3-venv util-linux mount tshark; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || need+=("$pkg")
done
if $runtime_only && [ ${#need[@]} -gt 0 ]; then
  mapfile -t need < <(printf '%s\n' "${need[@]}" | grep -vxE 'gcc|g\+\+|libc6-dev|cmake|make|git|libclang-dev|python3|python3-venv|tshark')
fi
if [ ${#need[@]} -gt 0 ]; then
  echo "setup.sh: installing ${need[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  # Debian would start caddy, nginx, apache2 and h2o on install (all on port 80: the second fails
  # and so would the install). pagebench starts its own servers inside namespaces: start none.
  policy=/usr/sbin/policy-rc.d
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' > "$policy" && chmod +x "$policy"
    trap 'rm -f "$policy"' EXIT
  fi
  apt-get update -qq >/dev/null
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
# Installed earlier with services enabled? Stop them (harmless without systemd).
for svc in caddy nginx apache2 h2o; do
  systemctl disable --now "$svc" >/dev/null 2>&1 || true
done
if $runtime_only; then
  exit 0
fi
if ! command -v cargo >/dev/null 2>&1; then
  echo "setup.sh: cargo is missing: install a Rust toolchain (rustup) first" >&2
  exit 1
fi
# .ci/run checks formatting and lints: rustfmt and clippy come with rustup's default profile,
# not with the minimal one.
for tool in fmt:rustfmt clippy:clippy; do
  if ! cargo "${tool%%:*}" --version >/dev/null 2>&1; then
    if command -v rustup >/dev/null 2>&1; then
      echo "setup.sh: installing ${tool##*:}" >&2
      rustup component add "${tool##*:}" >/dev/null
    else
      echo "setup.sh: cargo ${tool%%:*} is missing and there is no rustup to add ${tool##*:}" >&2
      exit 1
    fi
  fi
done
if ! cargo nextest --version >/dev/null 2>&1; then
  echo "setup.sh: installing cargo-nextest" >&2
  cargo install --locked --quiet cargo-nextest
fi
[ -e /dev/net/tun ] || { echo "setup.sh: /dev/net/tun is missing (modprobe tun)" >&2; exit 1; }
# kubernetes-validate (PyPI) in a venv under target/: the test that checks deploy/kubernetes/
# against the Kubernetes schema, offline (the schemas ship in the package).
venv="$(dirname "$0")/target/k8s-venv"
if [ ! -x "$venv/bin/kubernetes-validate" ]; then
  echo "setup.sh: installing kubernetes-validate into $venv" >&2
  mkdir -p "$(dirname "$venv")"
  if ! { python3 -m venv "$venv" && "$venv/bin/pip" install --quiet --disable-pip-version-check kubernetes-validate==1.37.0; }; then
    echo "setup.sh: kubernetes-validate could not be installed: the manifest test will say it was skipped" >&2
  fi
fi
cd "$(dirname "$0")"
mkdir -p target
# --servers quiche: pagebench's h3 server on quiche is its own package (quiche's vendored
# BoringSSL takes ~2 min to build once; pagebench's build stays without it). A no-op when built.
quiche_server=src/servers/helpers/quiche-server
if ! cargo build --release --locked --quiet --manifest-path "$quiche_server/Cargo.toml" \
    --target-dir target/quiche-server 2>target/quiche-server.log; then
  echo "setup.sh: building $quiche_server failed (see target/quiche-server.log)" >&2
  exit 1
fi
# --servers aioquic: aioquic from PyPI in a virtual environment.
venv=target/aioquic-venv
if ! "$venv/bin/python" -c 'import aioquic, sys; sys.exit(aioquic.__version__ != "1.7.2")' 2>/dev/null; then
  echo "setup.sh: installing aioquic 1.7.2 into $venv" >&2
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check aioquic==1.7.2
fi
