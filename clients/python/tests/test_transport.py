"""What the client sends where, against local HTTP servers of its own (no mds needed): credentials
never follow a redirect to another origin, http:// to a remote host is refused unless allowed, and
the timeout bounds the whole call, a body that drips in included."""

import json
import threading
import time
import unittest
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from mds_client import Client, MdsError

QUOTE = json.dumps({"success": True, "data": {"symbol": "AAPL", "price": 1.0}}).encode()


class _Server:
    """A loopback server whose handler is given; ``seen`` keeps each request's path and headers."""

    def __init__(self, handle):
        self.seen = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 -- http.server's name
                outer.seen.append((self.path, dict(self.headers)))
                handle(self)

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def _answer_quote(h):
    h.send_response(200)
    h.send_header("Content-Type", "application/json")
    h.send_header("Content-Length", str(len(QUOTE)))
    h.end_headers()
    h.wfile.write(QUOTE)


class RedirectTest(unittest.TestCase):
    def setUp(self):
        self.elsewhere = _Server(_answer_quote)
        self.home = _Server(self._redirect)
        self.target = None

    def tearDown(self):
        self.home.close()
        self.elsewhere.close()

    def _redirect(self, h):
        if h.path == "/api/quotes/AAPL" and self.target:
            h.send_response(302)
            h.send_header("Location", self.target)
            h.send_header("Content-Length", "0")
            h.end_headers()
        else:
            _answer_quote(h)

    def test_when_mds_redirects_to_another_origin_then_the_credentials_are_not_sent_there(self):
        self.target = f"{self.elsewhere.url}/api/quotes/AAPL"
        client = Client(self.home.url, api_key="secret-key", token="secret-token")
        self.assertEqual(client.quote("AAPL")["symbol"], "AAPL")
        (_, headers), = self.elsewhere.seen
        lowered = {k.lower() for k in headers}
        self.assertNotIn("x-api-key", lowered)
        self.assertNotIn("authorization", lowered)

    def test_when_mds_redirects_within_its_origin_then_the_credentials_go_along(self):
        self.target = f"{self.home.url}/api/quotes/AAPL-moved"
        client = Client(self.home.url, api_key="secret-key")
        client.quote("AAPL")
        _, headers = self.home.seen[-1]
        self.assertEqual({k.lower(): v for k, v in headers.items()}.get("x-api-key"), "secret-key")


class InsecureHttpTest(unittest.TestCase):
    def test_when_base_url_is_http_to_a_remote_host_then_it_is_refused_unless_allowed(self):
        with self.assertRaisesRegex(ValueError, "allow_insecure_http"):
            Client("http://mds.example.com", api_key="k")
        Client("http://mds.example.com", allow_insecure_http=True)
        for local in ("http://127.0.0.1:8000", "http://localhost:8000", "http://[::1]:8000", "https://mds.example.com"):
            Client(local)


class TimeoutTest(unittest.TestCase):
    def test_when_the_body_drips_in_then_the_timeout_bounds_the_whole_call(self):
        def drip(h):
            h.send_response(200)
            h.send_header("Content-Type", "application/json")
            h.send_header("Content-Length", "100")
            h.end_headers()
            try:
                for _ in range(100):
                    h.wfile.write(b" ")
                    h.wfile.flush()
                    time.sleep(0.2)
            except OSError:
                pass

        server = _Server(drip)
        try:
            client = Client(server.url, timeout=1.0)
            started = time.monotonic()
            with self.assertRaises(MdsError) as caught:
                client.quote("AAPL")
            elapsed = time.monotonic() - started
            self.assertEqual(caught.exception.code, 0)
            self.assertIn("did not answer within", caught.exception.error)
            # Each byte came within a socket timeout; only a bound on the call ends it (generously).
            self.assertLess(elapsed, 5.0)
        finally:
            server.close()


if __name__ == "__main__":
    unittest.main()
