# shellcheck shell=bash
# h2o as a benchmark peer: a config that matches servery's setup (static
# files, keep-alive, no access log) and keeps every path h2o writes in one
# prefix directory.
#
# Needs common.sh sourced first. Functions named "set X" set global X.
# shellcheck disable=SC2034
#
# Use:
#   write_h2o_conf PREFIX ROOT PORT WORKERS [PROTOCOL [CERT KEY]]
#   h2o_args PREFIX            # sets H2O_ARGS
#   taskset -c 0-3 h2o "${H2O_ARGS[@]}" &
#
# CPU pinning: Debian's h2o (2.2) has no per-thread affinity setting, so the
# caller pins the whole process to the worker CPUs with taskset and the
# kernel places the WORKERS threads within that set. Its threads share one
# listening socket (2.2 has no reuseport option), unlike nginx and servery.
# h2o 2.2 has no sendfile either: it reads files with pread into its own
# buffers. Keep-alive: h2o has no per-connection request limit, and
# http1-request-timeout is its idle timeout (75 s, as nginx's below). HTTP/2
# has no per-connection request limit in h2o either.

# h2o_listen PORT PROTOCOL [CERT KEY]: print the listen block for PROTOCOL:
#   http1  HTTP/1.1 in the clear (the default)
#   h2c    the same listener: h2o takes HTTP/2 by prior knowledge on any
#          cleartext listener (it looks for the connection preface)
#   h2     TLS; ALPN picks h2 (or http/1.1); needs CERT and KEY (PEM files)
h2o_listen() {
	local port=$1 protocol=$2 cert=${3:-} key=${4:-}
	printf 'listen:\n  host: 127.0.0.1\n  port: %s\n' "$port"
	case $protocol in
	http1 | h2c) ;;
	h2)
		[[ -f $cert && -f $key ]] || die "h2o h2 needs a certificate and key file, got '$cert' '$key'"
		printf '  ssl:\n'
		printf '    certificate-file: "%s"\n' "$cert"
		printf '    key-file: "%s"\n' "$key"
		# The versions servery (rustls) offers.
		printf '    minimum-version: TLSv1.2\n'
		;;
	*) die "h2o protocol must be http1, h2 or h2c, got '$protocol'" ;;
	esac
}

# write_h2o_conf PREFIX ROOT PORT WORKERS [PROTOCOL [CERT KEY]]: write
# PREFIX/h2o.conf that serves ROOT on 127.0.0.1:PORT with WORKERS threads,
# speaking PROTOCOL (see h2o_listen; default http1).
write_h2o_conf() {
	local prefix=$1 root=$2 port=$3 workers=$4 protocol=${5:-http1}
	local cert=${6:-} key=${7:-} listen user_line=""
	[[ -d $root ]] || die "h2o docroot '$root' is not a directory"
	[[ $workers =~ ^[1-9][0-9]*$ ]] || die "h2o workers must be >= 1, got '$workers'"
	listen=$(h2o_listen "$port" "$protocol" "$cert" "$key")
	mkdir -p "$prefix"
	# As root, h2o would setuid to 'nobody', who may not read a private temp
	# docroot; stay root, the same user servery runs as.
	if ((EUID == 0)); then
		user_line="user: root"
	fi
	cat >"$prefix/h2o.conf" <<CONF
# Written by scripts/lib/h2o.sh for a benchmark run; safe to delete.
$user_line
num-threads: $workers
# No access-log directive: h2o then writes no access log.
error-log: "$prefix/error.log"
pid-file: "$prefix/h2o.pid"
max-connections: 4096
http1-request-timeout: 75
file.send-compressed: OFF
$listen
hosts:
  "127.0.0.1:$port":
    paths:
      /:
        file.dir: "$root"
CONF
}

# h2o_args PREFIX: set the array H2O_ARGS to run h2o in the foreground on the
# config that write_h2o_conf made.
h2o_args() {
	local prefix=$1
	H2O_ARGS=(-c "$prefix/h2o.conf")
}

# h2o_version: print e.g. "h2o/2.2.5".
h2o_version() {
	h2o --version 2>&1 | sed -n 's/^h2o version /h2o\//p'
}
