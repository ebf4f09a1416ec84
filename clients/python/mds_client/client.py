"""The client: one method per market-data read, HTTP through urllib, errors as MdsError.

Every failure mds answers has one envelope, {"success": false, "error", "code", "detail"}; here it
is one exception class, so a notebook needs a single ``except MdsError``.
"""

from __future__ import annotations

import io
import ipaddress
import json
import socket
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Dict, Iterable, List, Optional, Union

__all__ = ["Client", "MdsError", "QuoteList"]

USER_AGENT = "mds-python/0.1.0"
CREDENTIAL_HEADERS = ("X-api-key", "Authorization")
READ_CHUNK_BYTES = 65536
CANDLE_COLUMNS = ["open", "high", "low", "close", "adj_close", "volume"]


class MdsError(Exception):
    """An answer that is not a success, or no answer at all.

    ``code`` is the HTTP status (404, 422, 429, 503, ...), or 0 when mds could not be reached;
    ``error`` is the envelope's message, stable English safe to show; ``retry_after`` is the
    ``Retry-After`` seconds of a 429 or 503 (None otherwise); ``violations`` lists the invalid
    values of a 422 (``[{"path": "query.range", "message": "..."}]``).
    """

    def __init__(
        self,
        code: int,
        error: str,
        retry_after: Optional[int] = None,
        violations: Optional[List[Dict[str, str]]] = None,
    ) -> None:
        super().__init__(f"{code}: {error}" if code else error)
        self.code = code
        self.error = error
        self.retry_after = retry_after
        self.violations = violations or []


class QuoteList(list):
    """The quotes of a batch, in request order; ``missing`` names the symbols mds does not know."""

    def __init__(self, quotes: Iterable[Dict[str, Any]], missing: Iterable[str]) -> None:
        super().__init__(quotes)
        self.missing: List[str] = list(missing)


def _pandas():
    try:
        import pandas  # noqa: PLC0415 -- optional: imported only where a DataFrame is asked for
    except ImportError:
        return None
    return pandas


def _origin(url: str):
    parts = urllib.parse.urlsplit(url)
    default = 443 if parts.scheme == "https" else 80
    return (parts.scheme.lower(), (parts.hostname or "").lower(), parts.port or default)


def _is_loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class _SameOriginCredentials(urllib.request.HTTPRedirectHandler):
    """Follows redirects, but sends the credentials only back to the origin they were given for."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):  # noqa: PLR0913 -- urllib's signature
        new = super().redirect_request(req, fp, code, msg, headers, newurl)
        if new is not None and _origin(newurl) != _origin(req.full_url):
            for name in CREDENTIAL_HEADERS:
                new.headers.pop(name, None)
                new.unredirected_hdrs.pop(name, None)
        return new


class Client:
    """A connection to one mds.

    ``api_key`` is sent as ``X-API-Key``, ``token`` (from ``POST /api/auth/login``) as a bearer
    token; market data is public unless the server sets DATA_REQUIRES_AUTH, so both are optional.
    They are sent only to ``base_url``'s origin: a redirect elsewhere is followed without them.
    ``http://`` is refused for a host that is not this machine (credentials and data would cross the
    network in clear) unless ``allow_insecure_http=True``. ``timeout`` (seconds) bounds each whole
    call, redirects and body included, not each socket operation.
    """

    def __init__(
        self,
        base_url: str,
        api_key: Optional[str] = None,
        token: Optional[str] = None,
        timeout: float = 30.0,
        allow_insecure_http: bool = False,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        scheme, host, _port = _origin(self.base_url)
        if scheme not in ("http", "https"):
            raise ValueError(f"base_url must be http:// or https:// (got {base_url!r})")
        if scheme == "http" and not _is_loopback(host) and not allow_insecure_http:
            raise ValueError(
                f"refusing http:// to {host}: use https://, or pass allow_insecure_http=True to send requests in clear"
            )
        self.timeout = timeout
        self._opener = urllib.request.build_opener(_SameOriginCredentials())
        self._headers = {"User-Agent": USER_AGENT}
        if api_key:
            self._headers["X-API-Key"] = api_key
        if token:
            self._headers["Authorization"] = f"Bearer {token}"

    def __repr__(self) -> str:
        # Credentials stay out of notebooks' output.
        return f"Client({self.base_url!r})"

    # --- market data -------------------------------------------------------------------------

    def quote(self, symbol: str, currency: Optional[str] = None) -> Dict[str, Any]:
        """The current quote of one symbol (case-insensitive), as a dict.

        ``currency`` (``"EUR"``; see docs/currencies.md) converts its prices at the live FX quote's
        rate; the dict's ``fx`` then names the rate and its time.
        """
        return self._json(f"/api/quotes/{_path(symbol)}", {"currency": currency})["data"]

    def quotes(self, symbols: Union[str, Iterable[str]], currency: Optional[str] = None) -> QuoteList:
        """Quotes of 1 to 50 symbols in one call, in request order; unknown ones under ``.missing``.

        ``currency`` converts each quote as ``quote`` does (one already in it is unchanged).
        """
        listed = symbols if isinstance(symbols, str) else ",".join(symbols)
        body = self._json("/api/quotes", {"symbols": listed, "currency": currency})
        return QuoteList(body["data"], body.get("missing", []))

    def history(
        self,
        symbol: str,
        interval: str = "1d",
        range: Optional[str] = None,  # noqa: A002 -- the API's own name for it
        start: Optional[str] = None,
        end: Optional[str] = None,
        frame: Optional[bool] = None,
        studies: Optional[Union[str, Iterable[str]]] = None,
        adjust: Optional[str] = None,
        currency: Optional[str] = None,
    ):
        """Candles of one symbol, oldest first.

        ``interval``: 1m 5m 15m 30m 1h 1d 1wk 1mo; either ``range`` (1d 5d 1mo 3mo 6mo 1y 2y 5y
        10y ytd max; mds's default 1mo) or ``start`` with an optional ``end`` (ISO 8601 dates or
        date-times, UTC). With pandas installed (or ``frame=True``): a DataFrame indexed by the bar's
        start (a UTC DatetimeIndex named ``time``) with the columns open, high, low, close,
        adj_close, volume, read from mds's CSV export. Without pandas (or ``frame=False``): the
        candles as a list of dicts, as the JSON answer has them (``time`` an ISO 8601 string).

        ``studies`` (``"sma:20,rsi"`` or a list; see docs/indicators.md) adds one DataFrame column
        per study output after the candle columns (``sma_20``, ``macd_12_26_9_signal``), computed
        by mds over the stored history so the first row is already exact; it needs a DataFrame.
        ``adjust``: ``splits`` (mds's default), ``none`` or ``all``.

        ``currency`` (``"EUR"``, ``"JPY"``; see docs/currencies.md) converts every price at the ECB's
        reference rate of its candle's date (studies are computed on the converted prices); volume is
        unchanged, and candles without a rate within 4 days are left out.
        """
        listed = _studies(studies)
        params = {"interval": interval, "range": range, "start": start, "end": end, "adjust": adjust, "currency": currency}
        pandas = _pandas() if frame is None or frame else None
        if (frame or listed is not None) and pandas is None:
            raise ImportError("history(frame=True) and studies need pandas (pip install pandas, or apt-get install python3-pandas)")
        if pandas is None:
            return self._json(f"/api/history/{_path(symbol)}", params)["data"]["candles"]
        text = self._get(f"/api/history/{_path(symbol)}", {**params, "format": "csv", "studies": listed}).decode("utf-8")
        # round_trip: the float64 mds wrote, not pandas' faster, last-digit-lossy parse.
        df = pandas.read_csv(io.StringIO(text), float_precision="round_trip")
        df.index = pandas.DatetimeIndex(pandas.to_datetime(df.pop("time"), utc=True), name="time")
        return df[CANDLE_COLUMNS + [c for c in df.columns if c not in CANDLE_COLUMNS]] if listed else df[CANDLE_COLUMNS]

    def indicators(
        self,
        symbol: str,
        studies: Union[str, Iterable[str]],
        interval: str = "1d",
        range: Optional[str] = None,  # noqa: A002 -- the API's own name for it
        start: Optional[str] = None,
        end: Optional[str] = None,
        adjust: Optional[str] = None,
        currency: Optional[str] = None,
    ) -> Dict[str, Any]:
        """``GET /api/indicators/{symbol}``: ``{"times": [...], "studies": {"sma:20": [...], ...}}``.

        Keys are the studies as mds normalises them (lower case, defaults filled in); a study with
        several outputs is a dict of lists (``{"macd": [...], "signal": [...], "histogram": [...]}``);
        ``None`` where a study has no value. A bad study raises MdsError 422 naming it. ``currency``
        computes the studies on the candles converted to it (an SMA in EUR of the EUR closes).
        """
        params = {"studies": _studies(studies), "interval": interval, "range": range, "start": start, "end": end, "adjust": adjust, "currency": currency}
        data = self._json(f"/api/indicators/{_path(symbol)}", params)["data"]
        return {"times": data["times"], "studies": data["studies"]}

    def search(self, q: str, limit: int = 10) -> List[Dict[str, Any]]:
        """Instruments whose symbol or name matches ``q``, best first."""
        return self._json("/api/search", {"q": q, "limit": limit})["data"]

    def markets(self) -> List[Dict[str, Any]]:
        """Every market quotes come from: its state now, next open and close, time zone."""
        return self._json("/api/markets")["data"]

    # --- transport ---------------------------------------------------------------------------

    def _json(self, path: str, params: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
        return json.loads(self._get(path, params, accept="application/json"))

    def _get(self, path: str, params: Optional[Dict[str, Any]] = None, accept: str = "*/*") -> bytes:
        query = urllib.parse.urlencode({k: v for k, v in (params or {}).items() if v is not None}, safe=",^:")
        url = f"{self.base_url}{path}{'?' + query if query else ''}"
        request = urllib.request.Request(url, headers={**self._headers, "Accept": accept})
        deadline = time.monotonic() + self.timeout
        try:
            with self._opener.open(request, timeout=self.timeout) as response:
                return _read_until(response, deadline)
        except urllib.error.HTTPError as err:
            raise _from_envelope(err) from None
        except (urllib.error.URLError, OSError) as err:
            reason = getattr(err, "reason", err)
            if isinstance(reason, socket.timeout) or time.monotonic() >= deadline:
                raise MdsError(0, f"mds at {self.base_url} did not answer within {self.timeout} s") from None
            raise MdsError(0, f"Cannot reach mds at {self.base_url}: {reason}") from None


def _studies(studies: Optional[Union[str, Iterable[str]]]) -> Optional[str]:
    if studies is None:
        return None
    return studies if isinstance(studies, str) else ",".join(studies)


def _read_until(response, deadline: float) -> bytes:
    """The body, read in chunks, each socket wait bounded by what is left of the call's time."""
    sock = getattr(getattr(getattr(response, "fp", None), "raw", None), "_sock", None)
    chunks = []
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise socket.timeout("the call's timeout passed while the body arrived")
        if sock is not None:
            sock.settimeout(left)
        chunk = response.read1(READ_CHUNK_BYTES) if hasattr(response, "read1") else response.read(READ_CHUNK_BYTES)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


def _path(symbol: str) -> str:
    return urllib.parse.quote(symbol, safe="")


def _from_envelope(err: urllib.error.HTTPError) -> MdsError:
    """The envelope of a failed answer as MdsError; a body that is not one still gives the status."""
    raw = err.read()
    retry = err.headers.get("Retry-After") if err.headers else None
    retry_after = int(retry) if retry is not None and retry.strip().isdigit() else None
    try:
        body = json.loads(raw)
        error = str(body.get("error") or body.get("detail") or err.reason)
        code = int(body.get("code") or err.code)
        violations = body.get("violations")
    except (ValueError, AttributeError):
        error, code, violations = str(err.reason), err.code, None
    return MdsError(code, error, retry_after=retry_after, violations=violations)
