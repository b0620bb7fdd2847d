# shellcheck shell=bash
# Caddy as a benchmark peer: a Caddyfile that matches servery's setup (static
# files, keep-alive, no access log) and keeps every path Caddy writes in one
# prefix directory.
#
# Needs common.sh sourced first. Functions named "set X" set global X.
# shellcheck disable=SC2034
#
# Use:
#   write_caddy_conf PREFIX ROOT PORT WORKERS [PROTOCOL [CERT KEY]]
#   caddy_args PREFIX          # sets CADDY_ARGS and CADDY_ENV
#   env "${CADDY_ENV[@]}" taskset -c 0-3 caddy "${CADDY_ARGS[@]}" &
#
# Workers and CPU pinning: Caddy is one Go process; the Go runtime runs its
# goroutines on GOMAXPROCS OS threads and moves them between threads as it
# likes, so there is no per-thread (per-worker) affinity to set, as there is
# in nginx and servery. WORKERS becomes GOMAXPROCS (PREFIX/caddy.env), and the
# caller pins the whole process to the worker CPUs with taskset, as for h2o.
# (Go's default GOMAXPROCS is the number of CPUs in the affinity mask it
# starts with, so under taskset the two agree; setting it says so.) All
# goroutines accept on one listening socket per port (Go has no reuseport).
#
# Keep-alive: Go's net/http has no per-connection request limit, for HTTP/1.1
# or HTTP/2; the idle timeout is set to 75 s as in nginx and h2o (Caddy's own
# default is 5 min). Files: Caddy's file_server answers with Go's
# http.ServeContent (ETag from size and mtime, Range, If-None-Match), which
# sends an HTTP/1.1 body in the clear with sendfile(2), after a write(2) of
# the head. HTTP/2 is Go's: SETTINGS_MAX_CONCURRENT_STREAMS 250 (servery and
# nginx 128, h2o 100), INITIAL_WINDOW_SIZE and MAX_FRAME_SIZE 1 MiB.
#
# Writes nothing outside PREFIX: no admin endpoint (`admin off`), and logs on
# stderr (the caller redirects them). Caddy 2.6 still saves the config it
# runs (XDG_CONFIG_HOME/caddy/autosave.json; its Caddyfile has no
# persist_config yet), keeps TLS storage in XDG_DATA_HOME/caddy and makes
# HOME/.step (smallstep's PKI library), so caddy.env points HOME and both XDG
# directories into PREFIX. Automatic HTTPS is off (no certificate management,
# no HTTP->HTTPS redirect server on port 80): TLS uses the CERT and KEY given.

# caddy_site PORT PROTOCOL [CERT KEY]: print the site block's address line
# and, for TLS, its tls directive, for PROTOCOL:
#   http1  HTTP/1.1 in the clear (the default)
#   h2c    HTTP/2 by prior knowledge in the clear, beside HTTP/1.1 on the
#          same port (`protocols h1 h2c`; Caddy >= 2.6)
#   h2     TLS; ALPN picks h2 (or http/1.1); needs CERT and KEY (PEM files)
#   h3     h2, and HTTP/3 (QUIC) on the same port number over UDP; Caddy
#          then also sends Alt-Svc on every answer over TCP (servery-load
#          matrix's h3-* scenarios, which load the UDP port)
caddy_site() {
	local port=$1 protocol=$2 cert=${3:-} key=${4:-}
	case $protocol in
	http1 | h2c) printf 'http://127.0.0.1:%s {\n' "$port" ;;
	h2 | h3)
		[[ -f $cert && -f $key ]] || die "caddy $protocol needs a certificate and key file, got '$cert' '$key'"
		printf 'https://127.0.0.1:%s {\n' "$port"
		printf '\ttls "%s" "%s" {\n' "$cert" "$key"
		# The versions servery (rustls) offers; Caddy's default too.
		printf '\t\tprotocols tls1.2 tls1.3\n'
		printf '\t}\n'
		;;
	*) die "caddy protocol must be http1, h2, h2c or h3, got '$protocol'" ;;
	esac
}

# caddy_protocols PROTOCOL: print the servers' `protocols` list for PROTOCOL.
# HTTP/3 is on only when asked for (Caddy's default is h1 h2 h3), so no
# answer over TCP carries Alt-Svc and no UDP socket is opened otherwise.
caddy_protocols() {
	case $1 in
	h2c) printf 'h1 h2c\n' ;;
	h3) printf 'h1 h2 h3\n' ;;
	*) printf 'h1 h2\n' ;;
	esac
}

# write_caddy_conf PREFIX ROOT PORT WORKERS [PROTOCOL [CERT KEY]]: write
# PREFIX/Caddyfile that serves ROOT on 127.0.0.1:PORT speaking PROTOCOL (see
# caddy_site; default http1), and PREFIX/caddy.env, the environment Caddy
# runs with, one KEY=VALUE a line: GOMAXPROCS=WORKERS, and HOME,
# XDG_CONFIG_HOME and XDG_DATA_HOME in PREFIX.
write_caddy_conf() {
	local prefix=$1 root=$2 port=$3 workers=$4 protocol=${5:-http1}
	local cert=${6:-} key=${7:-} site protocols
	[[ -d $root ]] || die "caddy docroot '$root' is not a directory"
	[[ $workers =~ ^[1-9][0-9]*$ ]] || die "caddy workers must be >= 1, got '$workers'"
	site=$(caddy_site "$port" "$protocol" "$cert" "$key")
	protocols=$(caddy_protocols "$protocol")
	mkdir -p "$prefix/config" "$prefix/data"
	# Absolute, so that caddy.env means the same from any working directory.
	prefix=$(cd "$prefix" && pwd)
	printf '%s\n' "GOMAXPROCS=$workers" "HOME=$prefix" \
		"XDG_CONFIG_HOME=$prefix/config" "XDG_DATA_HOME=$prefix/data" >"$prefix/caddy.env"
	cat >"$prefix/Caddyfile" <<CONF
# Written by scripts/lib/caddy.sh for a benchmark run; safe to delete.
# Run with GOMAXPROCS=$workers (caddy.env), pinned by the caller.
{
	admin off
	auto_https off
	# On SIGTERM Caddy closes idle connections and waits for busy ones this
	# long (default: for ever); servery-load matrix kills after 10 s.
	grace_period 5s
	servers {
		protocols $protocols
		timeouts {
			idle 75s
		}
	}
}

$site
	bind 127.0.0.1
	root * "$root"
	# No log directive: Caddy then writes no access log.
	file_server
}
CONF
}

# caddy_args PREFIX: set the array CADDY_ARGS to run Caddy in the foreground
# on the Caddyfile that write_caddy_conf made, and CADDY_ENV to the
# environment it runs with (PREFIX/caddy.env), for env(1).
caddy_args() {
	local prefix=$1
	CADDY_ARGS=(run --config "$prefix/Caddyfile" --adapter caddyfile)
	mapfile -t CADDY_ENV <"$prefix/caddy.env"
}

# caddy_version: print e.g. "caddy/2.6.2".
caddy_version() {
	caddy version 2>&1 | sed -n '1s/^v\{0,1\}\([0-9][^ ]*\).*/caddy\/\1/p'
}
