"""Every mds study computed again with pandas, independently of mds's TypeScript.

Written from the conventions docs/indicators.md states (TA-Lib's), with pandas' own operations
(rolling windows, ``ewm(adjust=False)``), so a test that finds mds's answers equal to these to 1e-9
checks both against one written-down rule. Used by the client's tests and, through ``main`` (JSON
on stdin: columns ``high``, ``low``, ``close``, ``volume``, ``session`` and a list of ``studies``; or a
list of such requests, answered in one process),
by mds's own test of the recorded histories.
"""

import json
import sys

import numpy as np
import pandas as pd


def _seeded(x, n, alpha):
    """A recursion seeded with the mean of the first n values (from the first non-null), then ewm."""
    x = pd.Series(x, dtype=float).reset_index(drop=True)
    out = pd.Series(np.nan, index=x.index)
    valid = np.flatnonzero(x.notna().to_numpy())
    if len(valid) < n:
        return out
    first = valid[0]
    seed_at = first + n - 1
    y = x.iloc[seed_at:].copy()
    y.iloc[0] = x.iloc[first : seed_at + 1].mean()
    out.iloc[seed_at:] = y.ewm(alpha=alpha, adjust=False).mean().to_numpy()
    return out


def ema(x, n):
    return _seeded(x, n, 2.0 / (n + 1))


def wilder(x, n):
    return _seeded(x, n, 1.0 / n)


def _ratio(num, den, scale=1.0):
    """num / den * scale, 0 where den is 0 (as TA-Lib answers)."""
    out = scale * num / den.where(den != 0)
    return out.where(~((den == 0) & num.notna()), 0.0)


def compute(frame, key):
    """The outputs of the study ``key`` (``rsi:14``) over ``frame``: a Series, or a dict of them."""
    name, *params = key.split(":")
    p = [float(v) if "." in v else int(v) for v in params]
    h, l, c, v = frame["high"], frame["low"], frame["close"], frame["volume"]
    if name == "sma":
        return c.rolling(p[0]).mean()
    if name == "ema":
        return ema(c, p[0])
    if name == "wma":
        n = p[0]
        weights = np.arange(1, n + 1)
        return c.rolling(n).apply(lambda w: np.dot(w, weights) / weights.sum(), raw=True)
    if name == "rsi":
        d = c.diff()
        gain, loss = wilder(d.clip(lower=0), p[0]), wilder((-d).clip(lower=0), p[0])
        return _ratio(gain, gain + loss, 100.0)
    if name == "macd":
        line = ema(c, p[0]) - ema(c, p[1])
        signal = ema(line, p[2])
        return {"macd": line, "signal": signal, "histogram": line - signal}
    if name == "bbands":
        mid = c.rolling(p[0]).mean()
        sd = c.rolling(p[0]).std(ddof=0)
        return {"upper": mid + p[1] * sd, "middle": mid, "lower": mid - p[1] * sd}
    if name == "stoch":
        hh, ll = h.rolling(p[0]).max(), l.rolling(p[0]).min()
        fast = _ratio(c - ll, hh - ll, 100.0)
        k = fast.rolling(p[1]).mean()
        return {"k": k, "d": k.rolling(p[2]).mean()}
    prev_close = c.shift(1)
    tr = pd.concat([h - l, (h - prev_close).abs(), (l - prev_close).abs()], axis=1).max(axis=1, skipna=False)
    if name == "atr":
        return wilder(tr, p[0])
    if name == "adx":
        n = p[0]
        up, down = h.diff(), -l.diff()
        plus = pd.Series(np.where((up > down) & (up > 0), up, 0.0))
        minus = pd.Series(np.where((down > up) & (down > 0), down, 0.0))

        def smoothed(dm):
            # TA-Lib's running sum: the sum of the first n-1 values, then sum - sum/n + value.
            # Divided by n that is an ewm(alpha=1/n) started at sum/n.
            start = dm.iloc[1:n].sum() / n
            x = dm.iloc[n - 1 :].copy()
            x.iloc[0] = start
            out = pd.Series(np.nan, index=dm.index)
            out.iloc[n - 1 :] = x.ewm(alpha=1.0 / n, adjust=False).mean().to_numpy()
            out.iloc[: n] = np.nan
            return out

        s_tr = smoothed(tr.fillna(0.0))
        plus_di = _ratio(smoothed(plus), s_tr, 100.0)
        minus_di = _ratio(smoothed(minus), s_tr, 100.0)
        dx = _ratio((plus_di - minus_di).abs(), plus_di + minus_di, 100.0)
        return {"adx": wilder(dx, n), "plus_di": plus_di, "minus_di": minus_di}
    if name == "obv":
        signed = np.sign(c.diff()).fillna(0.0) * v
        signed.iloc[0] = v.iloc[0]
        return signed.cumsum()
    if name == "vwap":
        session = frame["session"]
        tp = (h + l + c) / 3
        pv = (tp * v).groupby(session).cumsum()
        vol = v.groupby(session).cumsum()
        return (pv / vol.where(vol != 0)).where(session.notna())
    if name == "roc":
        before = c.shift(p[0])
        return _ratio(c - before, before, 100.0)
    if name == "willr":
        hh, ll = h.rolling(p[0]).max(), l.rolling(p[0]).min()
        return _ratio(hh - c, hh - ll, -100.0)
    if name == "cci":
        tp = (h + l + c) / 3
        mean = tp.rolling(p[0]).mean()
        deviation = tp.rolling(p[0]).apply(lambda w: np.mean(np.abs(w - w.mean())), raw=True)
        return _ratio(tp - mean, 0.015 * deviation)
    raise ValueError(f"unknown study {name}")


def _plain(series):
    return [None if (x is None or (isinstance(x, float) and np.isnan(x))) else float(x) for x in series]


def answer(request):
    frame = pd.DataFrame({k: request[k] for k in ("high", "low", "close", "volume")}, dtype=float)
    frame["session"] = pd.Series(request.get("session") or [None] * len(frame), dtype=object)
    out = {}
    for key in request["studies"]:
        result = compute(frame, key)
        out[key] = {k: _plain(s) for k, s in result.items()} if isinstance(result, dict) else _plain(result)
    return out


def main():
    """One request (an object) or several (a list): the answers in the same shape."""
    request = json.load(sys.stdin)
    json.dump([answer(r) for r in request] if isinstance(request, list) else answer(request), sys.stdout)


if __name__ == "__main__":
    main()
