# Shared pieces of the end-to-end scripts in tests/e2e/. Sourced, not run:
# the scripts set SERVER_PID and WORK, and PY (a Python 3 interpreter).

# Stops the server started by the script (SIGTERM, then SIGKILL after 5 s)
# and removes the work folder. Meant for `trap e2e_cleanup EXIT`.
e2e_cleanup() {
  if [[ -n "${SERVER_PID:-}" ]] && kill -0 "$SERVER_PID" 2>/dev/null; then
    kill -TERM "$SERVER_PID" 2>/dev/null
    for _ in $(seq 50); do kill -0 "$SERVER_PID" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$SERVER_PID" 2>/dev/null
  fi
  [[ -n "${WORK:-}" ]] && rm -rf "$WORK"
  return 0
}

# Prints two distinct free TCP ports on 127.0.0.1: both sockets are held
# while the ports are chosen, so the two differ.
e2e_free_ports() {
  "$PY" -c '
import socket
a, b = socket.socket(), socket.socket()
a.bind(("127.0.0.1", 0)); b.bind(("127.0.0.1", 0))
print(a.getsockname()[1], b.getsockname()[1])'
}

# Prints the failure and the tail of $WORK/server.log, then exits 1.
e2e_fail() {
  echo "FAIL: $*" >&2
  [[ -f "${WORK:-}/server.log" ]] && { echo "--- server log ---" >&2; tail -n 30 "$WORK/server.log" >&2; }
  exit 1
}
