#!/usr/bin/env bash
# A throwaway MLflow tracking server for the tests of `gpubench export` and `run --mlflow`
# (tests/test_mlflow.py), in its own virtual environment (the server is a service the tests talk
# to, like PostgreSQL: its packages stay out of gpubench's .venv, which holds only the client).
#   .ci/mlflow-local.sh up DIR     install mlflow into DIR/venv, start the server, wait for /health
#   .ci/mlflow-local.sh down DIR   stop it (by the pid it recorded)
# Then `export GPUBENCH_TEST_MLFLOW_URI="$(cat DIR/uri)"`. Store and artifacts live in DIR.
set -euo pipefail
cmd="${1:?usage: $0 up|down DIR}"
dir="${2:?usage: $0 up|down DIR}"
port="${GPUBENCH_MLFLOW_PORT:-5077}"
python="${PYTHON:-python3}"

case "$cmd" in
down)
  if [ -s "$dir/server.pid" ]; then
    pid="$(cat "$dir/server.pid")"
    kill -- "-$pid" 2>/dev/null || kill "$pid" 2>/dev/null || true  # the server and its uvicorn worker
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 -- "-$pid" 2>/dev/null || true
    rm -f "$dir/server.pid"
  fi
  exit 0 ;;
up) ;;
*) echo "usage: $0 up|down DIR" >&2; exit 2 ;;
esac

if [ ! -x "$dir/venv/bin/mlflow" ]; then
  "$python" -m venv "$dir/venv"
  "$dir/venv/bin/python" -m pip install -q --upgrade pip
  "$dir/venv/bin/python" -m pip install -q "mlflow>=3"
fi
# one worker: uvicorn's supervisor restarts workers that miss its health check on a loaded machine
setsid "$dir/venv/bin/mlflow" server --host 127.0.0.1 --port "$port" --workers 1 \
  --backend-store-uri "sqlite:///$dir/mlflow.db" --artifacts-destination "$dir/artifacts" \
  >"$dir/server.log" 2>&1 &
echo $! >"$dir/server.pid"
uri="http://127.0.0.1:$port"
for _ in $(seq 180); do
  if "$python" -c "import urllib.request,sys; urllib.request.urlopen(sys.argv[1] + '/health', timeout=2)" "$uri" \
    2>/dev/null; then
    echo "$uri" >"$dir/uri"
    exit 0
  fi
  sleep 1
done
echo "the MLflow server did not answer on $uri within 180 s:" >&2
tail -n 20 "$dir/server.log" >&2
exit 1
