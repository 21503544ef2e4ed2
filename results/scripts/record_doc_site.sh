#!/usr/bin/env bash
# Records a real documentation page, served from three origins on loopback, as a pagebench site
# archive: results/example/sites/$NAME (site.json + bodies/). Debian 12, as root.
#
# The page: part 7 of the Django tutorial, intro/tutorial07.html, as Debian's python-django-doc
# (3:3.2.25, Sphinx) ships it. Nobody in the project wrote it, and it is a typical documentation
# page: two render-blocking stylesheets in the head (pygments.css; default.css, which @imports
# reset-fonts-grids.css, djangodocs.css and homepage.css), six render-blocking scripts in the
# head (documentation_options, jquery, underscore, the Sphinx compat shim, doctools,
# sphinx_highlight) and one more (templatebuiltins.js) with inline jQuery after it, a late
# stylesheet in the body (console-tabs.css, which @imports Font Awesome's fa-brands.min.css),
# nine admin screenshots (7–72 KB) in the body and the admonition icon its CSS draws: 26
# responses, 0.6 MB decoded, 0.34 MB on the wire (gzip). The alternatives were poorer
# pages: debian-handbook's chapters have screenshots but no script at all; python3.11-doc's
# library index has scripts but hardly an image.
#
# What it does:
# 1. installs python-django-doc if it is missing (apt-get, quiet);
# 2. copies the page and every file it loads (the page's stylesheets, scripts and images, then
#    what the stylesheets @import and url()) into a temporary directory, one document root per
#    origin: the HTML on docs.test (127.0.0.2), CSS/JS/fonts on static.test (127.0.0.3), images
#    on img.test (127.0.0.4); the references that cross origins are rewritten to absolute
#    https://<origin>/… URLs (the HTML's src/href attributes, the CSS's url()s), every other byte
#    is the package's, but for one line: console-tabs.css is an unrendered Sphinx template whose
#    @import "{{ pathto('_static/fontawesome/css/fa-brands.min.css', 1) }}" 404s as shipped
#    (and a stylesheet that never loads makes every replay invalid: missing_resource), so it is
#    rendered as meant, to fontawesome/css/fa-brands.min.css; plus a /favicon.ico on docs.test
#    (one of the package's PNG icons in an ICO container: the package has no .ico), since
#    Chromium asks every page that names no icon for it and a real site answers it (without it
#    the archive keeps a 404 for it, which replays fine too);
# 3. serves them with Caddy (a self-signed certificate for the three names, made here; HTTP/1.1,
#    HTTP/2 and HTTP/3, gzip as a web server would) bound to those three loopback addresses on
#    port 443 only (no admin endpoint, no :80 redirects, no OCSP) and checks that it listens
#    nowhere else;
# 4. records https://docs.test/intro/tutorial07.html with `pagebench record --wait idle` (every
#    name --resolve'd to its loopback address, any other name to 127.0.0.9 where nothing listens,
#    so nothing can leave the machine);
# 5. stops what it started by PID (Caddy, pagebench and the Chromium pagebench started) and removes
#    its temporary directory on exit, error and Ctrl-C; prints a summary of the archive.
#
# Environment: PAGEBENCH (default target/release/pagebench), NAME (default django-tutorial07),
# OUT (default results/example/sites/$NAME; replaced if it exists).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
PAGEBENCH=${PAGEBENCH:-$ROOT/target/release/pagebench}
NAME=${NAME:-django-tutorial07}
OUT=${OUT:-$ROOT/results/example/sites/$NAME}
PKG=python-django-doc
DOC=/usr/share/doc/python-django-doc/html
PAGE=intro/tutorial07.html
FAVICON=_static/docicons-note.png   # wrapped as a PNG-in-ICO favicon (no .ico in the package)
DOCS_IP=127.0.0.2 STATIC_IP=127.0.0.3 IMG_IP=127.0.0.4 NOWHERE_IP=127.0.0.9
CADDY=${CADDY:-/usr/bin/caddy}

die() { echo "record_doc_site: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "run as root (apt-get, port 443)"
[ -x "$PAGEBENCH" ] || die "no pagebench binary at $PAGEBENCH (set PAGEBENCH)"
[ -x "$CADDY" ] || die "no caddy at $CADDY"

tmp= caddy_pid= pb_pid= chromium_pids=
cleanup() {
  local rc=$? p
  trap - EXIT INT TERM
  if [ -n "$pb_pid" ] && kill -0 "$pb_pid" 2>/dev/null; then
    kill -TERM "$pb_pid" 2>/dev/null || true
    wait "$pb_pid" 2>/dev/null || true
  fi
  # Chromium runs in its own process group (pagebench made it): end that group, if the PID is
  # still that browser (its own group leader, named chromium).
  for p in $chromium_pids; do
    [ "$(ps -o pgid= -p "$p" 2>/dev/null | tr -d ' ')" = "$p" ] || continue
    case "$(cat "/proc/$p/comm" 2>/dev/null)" in chrom*) ;; *) continue ;; esac
    kill -TERM -- "-$p" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -KILL -- "-$p" 2>/dev/null || true
  done
  if [ -n "$caddy_pid" ] && kill -0 "$caddy_pid" 2>/dev/null; then
    kill -TERM "$caddy_pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$caddy_pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$caddy_pid" 2>/dev/null || true
    wait "$caddy_pid" 2>/dev/null || true
  fi
  [ -n "$tmp" ] && rm -rf "$tmp"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# 1. The package.
if ! dpkg-query -W -f='${Status}' "$PKG" 2>/dev/null | grep -q 'install ok installed'; then
  echo "installing $PKG"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  apt-get install -y -qq --no-install-recommends "$PKG" >/dev/null
fi
[ -f "$DOC/$PAGE" ] || die "$DOC/$PAGE is missing after installing $PKG"
version=$(dpkg-query -W -f='${Version}' "$PKG")

# 2. The three document roots.
tmp=$(mktemp -d /tmp/record-doc-site.XXXXXX)
python3 - "$DOC" "$PAGE" "$tmp/www" "$FAVICON" <<'PY'
"""Copies PAGE and what it loads from DOC into WWW/{docs,static,img}/<same path>, rewriting
references that cross origins to absolute URLs; every other byte is left as it is."""
import os, re, shutil, struct, sys
from urllib.parse import unquote

doc, page, www, favicon = sys.argv[1:5]
HOSTS = {"docs": "docs.test", "static": "static.test", "img": "img.test"}
IMAGE = (".png", ".jpg", ".jpeg", ".gif", ".svg", ".webp", ".ico", ".avif")

FONTS = set()  # what @font-face rules load (an .svg font is a font, not an image)

def origin_of(rel):
    if rel.endswith(".html"):
        return "docs"
    if rel in FONTS:
        return "static"
    return "img" if rel.lower().endswith(IMAGE) else "static"

def resolve(base_rel, ref):
    """The file a relative reference names (path relative to DOC), or None."""
    if re.match(r"^[a-z][a-z0-9+.-]*:|^//|^#", ref, re.I) or "{{" in ref:
        return None
    path = unquote(ref.split("#")[0].split("?")[0])
    if not path:
        return None
    rel = os.path.normpath(os.path.join(os.path.dirname(base_rel), path))
    return rel if os.path.isfile(os.path.join(doc, rel)) else None

copied = {}
def copy(rel, data=None):
    dst = os.path.join(www, origin_of(rel), rel)
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    src = os.path.join(doc, rel)
    if data is None:
        shutil.copyfile(src, dst)  # follows Sphinx's symlinks into /usr/share/javascript
    else:
        with open(dst, "wb") as f:
            f.write(data)
    st = os.stat(src)  # keep the package's mtime: Last-Modified and ETag as shipped
    os.utime(dst, (st.st_atime, st.st_mtime))
    copied[rel] = origin_of(rel)

def absolute(rel):
    return "https://%s/%s" % (HOSTS[origin_of(rel)], rel)

def do_css(rel, seen):
    if rel in seen:
        return
    seen.add(rel)
    data = open(os.path.join(doc, rel), "rb").read().decode("utf-8")
    # console-tabs.css is a Sphinx template shipped unrendered: its @import names
    # "{{ pathto('_static/fontawesome/css/fa-brands.min.css', 1) }}", which a browser asks for
    # literally and gets a 404 (and pagebench's replay counts a stylesheet that never loaded as
    # missing_resource). Render it as meant: the path of that file from this stylesheet.
    data = re.sub(r"""\{\{\s*pathto\(\s*'([^']+)'\s*,\s*1\s*\)\s*\}\}""",
                  lambda m: os.path.relpath(m.group(1), os.path.dirname(rel)), data)
    for face in re.findall(r"@font-face\s*\{[^}]*\}", data):
        for ref in re.findall(r"""url\(\s*["']?([^"')]+)""", face):
            target = resolve(rel, ref)
            if target:
                FONTS.add(target)
    def sub(m):
        ref = m.group(2)
        target = resolve(rel, ref)
        if target is None:
            return m.group(0)
        if target.endswith(".css"):
            do_css(target, seen)
        else:
            copy(target)
        if origin_of(target) == origin_of(rel):
            return m.group(0)
        return m.group(1) + absolute(target) + m.group(3)
    out = re.sub(r"""(url\(\s*["']?)([^"')]+)(["']?\s*\))""", sub, data)
    out = re.sub(r"""(@import\s+["'])([^"']+)(["'])""", sub, out)
    copy(rel, out.encode("utf-8"))

html = open(os.path.join(doc, page), "rb").read().decode("utf-8")
seen = set()
def sub_html(m):
    tag, attr, ref = m.group(1), m.group(2), m.group(4)
    # what the page loads: <script src>, <img src>, <link rel=stylesheet href>
    if tag == "link" and not re.search(r"""rel=["']stylesheet["']""", m.group(0)):
        return m.group(0)
    target = resolve(page, ref)
    if target is None:
        return m.group(0)
    if target.endswith(".css"):
        do_css(target, seen)
    else:
        copy(target)
    return m.group(0).replace(m.group(3), m.group(3)[0] + absolute(target) + m.group(3)[-1], 1)
out = re.sub(r"""<(script|img|link)\b[^>]*?\b(src|href)=(["']([^"']*)["'])[^>]*>""", sub_html, html)
copy(page, out.encode("utf-8"))

# /favicon.ico on docs.test: Chromium asks for it when the page names no icon. The package has no
# .ico, so one of its own PNG icons goes in an ICO container (an ICONDIR of one PNG entry).
png = open(os.path.join(doc, favicon), "rb").read()
w, h = struct.unpack(">II", png[16:24])
ico = struct.pack("<HHH", 0, 1, 1) + struct.pack(
    "<BBBBHHII", w % 256, h % 256, 0, 0, 1, 32, len(png), 22) + png
dst = os.path.join(www, "docs", "favicon.ico")
with open(dst, "wb") as f:
    f.write(ico)
st = os.stat(os.path.join(doc, favicon))
os.utime(dst, (st.st_atime, st.st_mtime))

for o in HOSTS:
    files = sorted(r for r, oo in copied.items() if oo == o)
    print("  %-11s %2d files: %s" % (HOSTS[o], len(files) + (o == "docs"),
          ", ".join(os.path.basename(f) for f in files) + (", favicon.ico" if o == "docs" else "")))
PY

# 3. Caddy on the three loopback addresses.
cert=$tmp/cert.pem key=$tmp/key.pem
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 30 \
  -subj /CN=docs.test -addext "subjectAltName=DNS:docs.test,DNS:static.test,DNS:img.test" \
  -keyout "$key" -out "$cert" 2>/dev/null
spki=$(openssl x509 -in "$cert" -pubkey -noout | openssl pkey -pubin -outform der |
  openssl dgst -sha256 -binary | base64)
for ip in $DOCS_IP $STATIC_IP $IMG_IP; do
  if ss -Hlntu "( sport = :443 )" | awk '{print $5}' | grep -qE "^(\*|0\.0\.0\.0|\[::\]|$ip):443$"; then
    die "something already listens on $ip:443"
  fi
done
site() { # host ip root
  cat <<EOF
https://$1:443 {
	bind $2
	tls $cert $key
	root * $3
	encode gzip
	file_server
}
EOF
}
{
  cat <<EOF
{
	admin off
	auto_https off
	ocsp_stapling off
	storage file_system $tmp/caddy-data
	servers {
		protocols h1 h2 h3
	}
	log {
		output file $tmp/caddy.log
	}
}
EOF
  site docs.test $DOCS_IP "$tmp/www/docs"
  site static.test $STATIC_IP "$tmp/www/static"
  site img.test $IMG_IP "$tmp/www/img"
} >"$tmp/Caddyfile"
HOME=$tmp XDG_DATA_HOME=$tmp/xdg-data XDG_CONFIG_HOME=$tmp/xdg-config \
  "$CADDY" run --adapter caddyfile --config "$tmp/Caddyfile" >"$tmp/caddy.out" 2>&1 &
caddy_pid=$!
ready=
for _ in $(seq 100); do
  kill -0 "$caddy_pid" 2>/dev/null || { cat "$tmp/caddy.out" >&2; die "caddy exited"; }
  if curl -sf -o /dev/null --max-time 2 --cacert "$cert" \
       --resolve docs.test:443:$DOCS_IP "https://docs.test/$PAGE"; then ready=1; break; fi
  sleep 0.1
done
[ -n "$ready" ] || { cat "$tmp/caddy.out" >&2; die "caddy did not answer on $DOCS_IP:443"; }
# Where Caddy listens: exactly the three addresses, port 443, TCP and UDP.
listening=$(ss -Hlntup | awk -v pid="pid=$caddy_pid," 'index($0, pid) {print $1, $5}' | sort -u)
expected=$(for p in tcp udp; do for ip in $DOCS_IP $STATIC_IP $IMG_IP; do echo "$p $ip:443"; done; done | sort)
[ "$listening" = "$expected" ] || die "caddy listens on $(echo "$listening" | tr '\n' ' ')(expected only $DOCS_IP, $STATIC_IP, $IMG_IP port 443 tcp+udp)"

# 4. The recording.
"$PAGEBENCH" record "https://docs.test/$PAGE" --out "$tmp/archive" --wait idle --timeout 60s \
  --resolve docs.test=$DOCS_IP --resolve static.test=$STATIC_IP --resolve img.test=$IMG_IP \
  --resolve "*=$NOWHERE_IP" \
  --ignore-cert-errors --ignore-cert-spki "$spki" >"$tmp/record.out" 2>"$tmp/record.err" &
pb_pid=$!
while kill -0 "$pb_pid" 2>/dev/null; do
  for c in $(pgrep -P "$pb_pid" 2>/dev/null || true); do
    case "$(cat "/proc/$c/comm" 2>/dev/null)" in chrom*) ;; *) continue ;; esac
    case " $chromium_pids " in *" $c "*) ;; *) chromium_pids="$chromium_pids $c" ;; esac
  done
  sleep 0.2
done
rc=0; wait "$pb_pid" || rc=$?
pb_pid=
cat "$tmp/record.out"
[ "$rc" = 0 ] || { cat "$tmp/record.err" >&2; die "pagebench record failed (rc=$rc)"; }
# Only a whole recording replaces the archive.
rm -rf "$OUT"
mkdir -p "$(dirname "$OUT")"
cp -r "$tmp/archive" "$OUT"

# 5. Summary: per origin, the responses, wire bytes and protocol(s) recorded.
python3 - "$OUT" "$PKG" "$version" <<'PY'
import json, os, sys
from collections import defaultdict
from urllib.parse import urlsplit
out, pkg, version = sys.argv[1:4]
site = json.load(open(os.path.join(out, "site.json")))
per = defaultdict(lambda: {"n": 0, "bytes": 0, "protocols": set(), "statuses": set(), "addr": set()})
for e in site["entries"]:
    o = per[urlsplit(e["url"]).netloc]
    o["n"] += 1
    o["bytes"] += (e.get("body") or {}).get("size", 0)
    o["protocols"].add(e.get("protocol") or "?")
    o["statuses"].add(e["status"])
    o["addr"].add(e.get("server_address") or "?")
disk = sum(os.path.getsize(os.path.join(dp, f)) for dp, _, fs in os.walk(out) for f in fs)
print("archive %s (%s %s, page %s)" % (out, pkg, version, site["page_url"]))
print("  %d responses, %d origins, %d body bytes on the wire, %d bytes on disk" % (
    len(site["entries"]), len(per), sum(o["bytes"] for o in per.values()), disk))
for host, o in per.items():
    print("  %-12s %-16s %2d responses %8d bytes  protocol %s  status %s" % (
        host, ",".join(sorted(o["addr"])), o["n"], o["bytes"], ",".join(sorted(o["protocols"])),
        ",".join(str(x) for x in sorted(o["statuses"]))))
if disk >= 3 * 1024 * 1024:
    sys.exit("the archive is %d bytes: over the 3 MB budget" % disk)
PY
