# usage: h2b.sh BIN PORT [extra args...]
BIN=$1; PORT=$2; shift 2
taskset -c 0 $BIN serve /tmp/b8 --bind 127.0.0.1:$((PORT+1)) --tls-bind 127.0.0.1:$PORT --tls-self-signed --workers 1 "$@" > /tmp/h2b-srv.log 2>&1 &
SPID=$!
sleep 1
for i in 1 2 3 4 5 6 7 8 9 10; do curl -sk --http2 -o /dev/null https://127.0.0.1:$PORT/8m.bin && break; sleep 0.3; done
h2load -c 8 -m 8 -t 1 -D 3 https://127.0.0.1:$PORT/8m.bin > /dev/null 2>&1   # warm-up
T0=$(awk '{print $14+$15}' /proc/$SPID/stat)
OUT=$(taskset -c 1 h2load -c 8 -m 8 -t 1 -D 8 https://127.0.0.1:$PORT/8m.bin 2>&1)
T1=$(awk '{print $14+$15}' /proc/$SPID/stat)
kill $SPID; wait $SPID 2>/dev/null
REQ=$(echo "$OUT" | grep -E "^requests:" | awk '{print $8}')
echo "$BIN $* : succeeded=$REQ rps=$(echo "$OUT" | grep -E "finished in" | sed 's/.*, \([0-9.]*\) req\/s.*/\1/') cpu_ticks=$((T1-T0)) ms_per_req=$(echo "scale=2; ($T1-$T0)*10/$REQ" | bc)"
