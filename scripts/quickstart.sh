#!/usr/bin/env bash
# The README's first command: install packages, build, start the server (CUDA if a GPU is
# visible, else CPU) in the background, and run the demo against it. The server keeps running;
# its PID and log are printed at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
./scripts/build.sh
port=${GPUCOMPUTE_PORT:-50051}
log=build/gpucompute-server.log
rm -f build/server.port
build/server/gpucompute-server --address="127.0.0.1:${port}" --port_file=build/server.port \
  >"$log" 2>&1 &
pid=$!
for _ in $(seq 1 600); do
  [ -s build/server.port ] && break
  kill -0 "$pid" 2>/dev/null || { cat "$log"; echo "quickstart: the server exited" >&2; exit 1; }
  sleep 0.1
done
[ -s build/server.port ] || { cat "$log"; echo "quickstart: the server did not start" >&2; exit 1; }
build/client/cli/gpucompute --target="127.0.0.1:${port}" demo
echo
echo "gpucompute-server is running on 127.0.0.1:${port} (pid ${pid}, log ${log}); stop it with: kill ${pid}"
