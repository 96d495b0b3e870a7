# Sourced by the GPU scripts (run_gpu.sh, load_gpu.sh, load_dense_gpu.sh).
# start_server PORT_FILE LOG [server flags...]: starts a CUDA gpucompute-server on a free
# loopback port, its output appended to LOG; returns once it has written PORT_FILE (120 s at
# most: a fresh machine's first start compiles and warms the kernels, about 30 s; sooner if the
# server exits) with its pid in $spid and its address in $target.
start_server() {
  local port_file=$1 log=$2
  shift 2
  rm -f "$port_file"
  gpucompute-server --address=127.0.0.1:0 --port_file="$port_file" --backend=cuda "$@" >> "$log" 2>&1 &
  spid=$!
  for _ in $(seq 1 1200); do
    { [ -s "$port_file" ] || ! kill -0 "$spid" 2>/dev/null; } && break
    sleep 0.1
  done
  target="127.0.0.1:$(cat "$port_file" 2>/dev/null)"
}
