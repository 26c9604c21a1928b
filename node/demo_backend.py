"""``switchboard demo-backend``: a tiny order service for the default profile's lookup.

``GET /orders/<number>`` answers a few fixed orders as JSON (``{"status", "eta"}``), 404
for any other number. It stands in for the operator's own order system while a profile is
tried out; it holds no data of anyone's.
"""

from __future__ import annotations

import json
import re
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ORDERS = {
    "12345": {"status": "on its way", "eta": "Friday the 28th"},
    "24680": {"status": "being packed", "eta": "Monday the 1st"},
    "55555": {"status": "delivered", "eta": "Tuesday the 24th"},
}
_PATH = re.compile(r"^/orders/(\d{1,32})$")


class _Handler(BaseHTTPRequestHandler):
    server_version = "switchboard-demo"

    def do_GET(self) -> None:
        match = _PATH.match(self.path.split("?", 1)[0])
        order = ORDERS.get(match.group(1)) if match else None
        body = json.dumps(order if order else {"error": "not found"}).encode()
        self.send_response(200 if order else 404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass  # the order numbers asked for are not written anywhere


def serve(host: str, port: int) -> ThreadingHTTPServer:
    """The demo service, bound (``serve_forever`` to answer)."""
    return ThreadingHTTPServer((host, port), _Handler)


def run(host: str, port: int) -> int:
    server = serve(host, port)
    print(f"demo order service on http://{host}:{server.server_port}/orders/<number>", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0
