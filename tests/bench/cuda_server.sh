# Sourced by the GPU scripts (run_gpu.sh, load_gpu.sh, load_dense_gpu.sh, ab_small_calls.sh, ...).
# wait_for_port PORT_FILE PID [TENTHS]: returns once the server PID has written PORT_FILE, or has
# exited, or after TENTHS tenths of a second (default 1200: a fresh machine's first start compiles
# and warms the kernels, about 30 s).
wait_for_port() {
  local port_file=$1 pid=$2 tenths=${3:-1200}
  for _ in $(seq 1 "$tenths"); do
    { [ -s "$port_file" ] || ! kill -0 "$pid" 2>/dev/null; } && break
    sleep 0.1
  done
}

# start_server PORT_FILE LOG [server flags...]: starts a CUDA gpucompute-server on a free
# loopback port, its output appended to LOG; returns once it has written PORT_FILE (or exited, or
# after 120 s: wait_for_port) with its pid in $spid and its address in $target.
start_server() {
  local port_file=$1 log=$2
  shift 2
  rm -f "$port_file"
  gpucompute-server --address=127.0.0.1:0 --port_file="$port_file" --backend=cuda "$@" >> "$log" 2>&1 &
  spid=$!
  wait_for_port "$port_file" "$spid"
  target="127.0.0.1:$(cat "$port_file" 2>/dev/null)"
}
