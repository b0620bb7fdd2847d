# shellcheck shell=bash
# nginx as a benchmark peer: a config that matches servery's setup (static
# files, keep-alive, pinned workers) and keeps every path nginx writes in one
# prefix directory, so a run as root leaves /etc/nginx and /var/log alone.
#
# Needs common.sh sourced first. Functions named "set X" set global X.
# shellcheck disable=SC2034
#
# Use:
#   write_nginx_conf PREFIX ROOT PORT WORKERS CPUS [PROTOCOL [CERT KEY]]
#   nginx_args PREFIX          # sets NGINX_ARGS
#   taskset -c 0 nginx "${NGINX_ARGS[@]}" &

# nginx_affinity WORKERS CPUS: print the worker_cpu_affinity value that puts
# worker i on the i-th CPU of CPUS (wrapping round), e.g. 2 workers on "0,2"
# -> "0001 0100". nginx reads each mask right to left: the last digit is CPU 0.
nginx_affinity() {
	local workers=$1 cpus_list=$2 i cpu max=3 width mask out=()
	local -a cpus
	mapfile -t cpus < <(cpu_list_expand "$cpus_list")
	((${#cpus[@]} > 0)) || die "empty CPU list '$cpus_list'"
	for cpu in "${cpus[@]}"; do
		((cpu > max)) && max=$cpu
	done
	width=$((max + 1))
	for ((i = 0; i < workers; i++)); do
		cpu=${cpus[i % ${#cpus[@]}]}
		mask=$(printf '%0*d' "$width" 0)
		# Set the digit for $cpu, counting from the right.
		mask="${mask:0:width-1-cpu}1${mask:width-cpu}"
		out+=("$mask")
	done
	printf '%s\n' "${out[*]}"
}

# nginx_listen PORT PROTOCOL [CERT KEY]: print the server block's listen line
# (and, for h2, its certificate lines) for PROTOCOL:
#   http1  HTTP/1.1 in the clear (the default)
#   h2     TLS; ALPN picks h2 (or http/1.1); needs CERT and KEY (PEM files)
#   h2c    HTTP/2 by prior knowledge in the clear; nginx then answers only
#          HTTP/2 on the port (an HTTP/1.1 request there gets no answer)
nginx_listen() {
	local port=$1 protocol=$2 cert=${3:-} key=${4:-}
	printf '        # reuseport: one listening socket per worker, as servery does.\n'
	case $protocol in
	http1) printf '        listen 127.0.0.1:%s reuseport;\n' "$port" ;;
	h2c) printf '        listen 127.0.0.1:%s http2 reuseport;\n' "$port" ;;
	h2)
		[[ -f $cert && -f $key ]] || die "nginx h2 needs a certificate and key file, got '$cert' '$key'"
		printf '        listen 127.0.0.1:%s ssl http2 reuseport;\n' "$port"
		printf '        ssl_certificate "%s";\n' "$cert"
		printf '        ssl_certificate_key "%s";\n' "$key"
		# The versions servery (rustls) offers; nginx 1.22 would add 1.0 and 1.1.
		printf '        ssl_protocols TLSv1.2 TLSv1.3;\n'
		;;
	*) die "nginx protocol must be http1, h2 or h2c, got '$protocol'" ;;
	esac
}

# write_nginx_conf PREFIX ROOT PORT WORKERS CPUS [PROTOCOL [CERT KEY]]: write
# PREFIX/nginx.conf that serves ROOT on 127.0.0.1:PORT with WORKERS workers
# pinned to CPUS, speaking PROTOCOL (see nginx_listen; default http1), and
# make PREFIX/tmp for nginx's temp files. NGINX_ACCESS_LOG, if set, is the
# access_log directive's arguments (default: off), e.g.
# NGINX_ACCESS_LOG='"/tmp/a.log" combined buffer=64k flush=1s'.
write_nginx_conf() {
	local prefix=$1 root=$2 port=$3 workers=$4 cpu_list=$5 protocol=${6:-http1}
	local cert=${7:-} key=${8:-} affinity listen user_line=""
	[[ -d $root ]] || die "nginx docroot '$root' is not a directory"
	[[ $workers =~ ^[1-9][0-9]*$ ]] || die "nginx workers must be >= 1, got '$workers'"
	affinity=$(nginx_affinity "$workers" "$cpu_list")
	listen=$(nginx_listen "$port" "$protocol" "$cert" "$key")
	mkdir -p "$prefix/tmp"
	# As root, nginx would drop its workers to 'nobody', who may not read a
	# private temp docroot; keep them as root, the same user servery runs as.
	if ((EUID == 0)); then
		user_line="user root root;"
	fi
	cat >"$prefix/nginx.conf" <<CONF
# Written by scripts/lib/nginx.sh for a benchmark run; safe to delete.
$user_line
worker_processes $workers;
worker_cpu_affinity $affinity;
daemon off;
master_process on;
pid "$prefix/nginx.pid";
error_log "$prefix/error.log" warn;

events {
    worker_connections 4096;
}

http {
    # Inline types: no dependency on /etc/nginx/mime.types.
    types {
        text/html html htm;
        text/css css;
        text/plain txt;
        application/javascript js;
        application/json json;
        image/svg+xml svg;
        image/png png;
    }
    default_type application/octet-stream;

    access_log ${NGINX_ACCESS_LOG:-off};
    sendfile on;
    tcp_nopush on;
    tcp_nodelay on;
    # Since nginx 1.19.7 this also bounds the requests of one HTTP/2
    # connection (http2_max_requests is gone), so it is as high for h2.
    keepalive_requests 1000000;
    keepalive_timeout 75s;
    open_file_cache max=1000 inactive=20s;
    server_tokens off;

    client_body_temp_path "$prefix/tmp/client_body";
    proxy_temp_path "$prefix/tmp/proxy";
    fastcgi_temp_path "$prefix/tmp/fastcgi";
    uwsgi_temp_path "$prefix/tmp/uwsgi";
    scgi_temp_path "$prefix/tmp/scgi";

    server {
$listen
        server_name localhost;
        root "$root";
        index index.html;

        # On-the-fly gzip for the gzip-64k-js scenario (issue 13), as an
        # operator turns it on: gzip_comp_level and gzip_min_length at their
        # defaults (1, 20), JavaScript added to gzip_types, no gzip_static,
        # and Vary as servery sends it. Other files are never compressed.
        location ~ \.js\$ {
            gzip on;
            gzip_types application/javascript;
            gzip_vary on;
        }
    }
}
CONF
}

# nginx_args PREFIX: set the array NGINX_ARGS to run nginx on the config that
# write_nginx_conf made. -e (nginx >= 1.19.5) sets the startup error log,
# which nginx opens before it reads the config's error_log.
nginx_args() {
	local prefix=$1
	NGINX_ARGS=(-p "$prefix/" -e "$prefix/error.log" -c "$prefix/nginx.conf")
}

# nginx_version: print e.g. "nginx/1.22.1" (nginx -v writes to stderr).
nginx_version() {
	nginx -v 2>&1 | sed -n 's/^nginx version: //p'
}
