"""The client against a running mds (simulated provider).

MDS_URL names it; MDS_LIMITED_URL, when set, names one started with a tiny
RATE_LIMIT_ANONYMOUS_PER_MINUTE for the 429. The vitest suite starts both and runs
``python3 -m unittest`` here (test/e2e/python-client.test.ts).
"""

import os
import unittest

from mds_client import Client, MdsError, QuoteList

try:
    import pandas
except ImportError:  # the list-of-dicts path is still tested
    pandas = None

MDS_URL = os.environ.get("MDS_URL")
MDS_LIMITED_URL = os.environ.get("MDS_LIMITED_URL")
CANDLE_COLUMNS = ["open", "high", "low", "close", "adj_close", "volume"]


@unittest.skipUnless(MDS_URL, "set MDS_URL to a running mds")
class MarketDataTest(unittest.TestCase):
    def setUp(self):
        self.mds = Client(MDS_URL)

    def test_when_quotes_of_known_and_unknown_symbols_are_asked_then_known_ones_in_order_and_the_rest_missing(self):
        quotes = self.mds.quotes(["MSFT", "aapl", "NOSUCH"])
        self.assertIsInstance(quotes, QuoteList)
        self.assertEqual([q["symbol"] for q in quotes], ["MSFT", "AAPL"])
        self.assertEqual(quotes.missing, ["NOSUCH"])
        for quote in quotes:
            self.assertIsInstance(quote["price"], (int, float))

    def test_when_one_quote_is_asked_in_lower_case_then_it_is_the_symbol_upper_cased(self):
        quote = self.mds.quote("aapl")
        self.assertEqual(quote["symbol"], "AAPL")
        self.assertGreater(quote["price"], 0)

    @unittest.skipUnless(pandas, "pandas is not installed")
    def test_when_history_is_asked_with_pandas_then_a_dataframe_with_a_utc_datetimeindex_and_the_candle_columns(self):
        df = self.mds.history("AAPL", interval="1d", range="3mo")
        self.assertIsInstance(df, pandas.DataFrame)
        self.assertIsInstance(df.index, pandas.DatetimeIndex)
        self.assertEqual(str(df.index.tz), "UTC")
        self.assertEqual(df.index.name, "time")
        self.assertEqual(list(df.columns), CANDLE_COLUMNS)
        self.assertGreater(len(df), 40)
        self.assertTrue(df.index.is_monotonic_increasing)
        # The same candles as the JSON answer, value for value.
        candles = self.mds.history("AAPL", interval="1d", range="3mo", frame=False)
        self.assertEqual(len(df), len(candles))
        self.assertEqual(list(df["close"]), [c["close"] for c in candles])
        self.assertEqual(df.index[0], pandas.Timestamp(candles[0]["time"]))

    def test_when_a_quote_is_asked_in_a_currency_then_its_prices_are_converted_and_fx_names_the_rate(self):
        raw = self.mds.quote("AAPL")
        converted = self.mds.quote("AAPL", currency="eur")
        self.assertEqual(converted["currency"], "EUR")
        self.assertEqual(converted["fx"]["from"], "USD")
        self.assertAlmostEqual(converted["price"], raw["price"] * converted["fx"]["rate"], delta=1e-9 * raw["price"])
        self.assertIn("rate_time", converted["fx"])
        batch = self.mds.quotes(["AAPL", "SAP.DE"], currency="EUR")
        self.assertEqual([q["currency"] for q in batch], ["EUR", "EUR"])

    def test_when_history_is_asked_in_a_currency_then_every_close_is_converted_at_a_euro_rate(self):
        usd = self.mds.history("AAPL", start="2024-04-02", end="2024-07-01", frame=False)
        eur = self.mds.history("AAPL", start="2024-04-02", end="2024-07-01", currency="EUR", frame=False)
        self.assertEqual([c["time"] for c in eur], [c["time"] for c in usd])
        # EURUSD stayed between 1.06 and 1.10 over the window.
        for a, b in zip(eur, usd):
            self.assertTrue(1 / 1.10 < a["close"] / b["close"] < 1 / 1.06, (a, b))
        with self.assertRaises(MdsError) as caught:
            self.mds.history("AAPL", start="2024-04-02", end="2024-07-01", currency="XYZ", frame=False)
        self.assertEqual(caught.exception.code, 422)

    def test_when_history_is_asked_without_a_frame_then_a_list_of_candle_dicts(self):
        candles = self.mds.history("BTC-USD", interval="1h", range="5d", frame=False)
        self.assertIsInstance(candles, list)
        self.assertGreater(len(candles), 24)
        self.assertEqual(set(candles[0]), {"time", *CANDLE_COLUMNS})
        self.assertLess(candles[0]["time"], candles[-1]["time"])

    def test_when_searching_then_matches_best_first_within_the_limit(self):
        found = self.mds.search("apple", limit=3)
        self.assertLessEqual(len(found), 3)
        self.assertEqual(found[0]["symbol"], "AAPL")

    def test_when_markets_are_asked_then_each_has_a_state_and_a_time_zone(self):
        markets = self.mds.markets()
        self.assertGreater(len(markets), 0)
        for market in markets:
            self.assertIn("timezone", market)
            self.assertIn("state", market)

    def test_when_the_symbol_is_unknown_then_mds_error_with_code_404(self):
        with self.assertRaises(MdsError) as raised:
            self.mds.quote("NOSUCH")
        self.assertEqual(raised.exception.code, 404)
        self.assertEqual(raised.exception.error, "Unknown symbol 'NOSUCH'")
        self.assertIsNone(raised.exception.retry_after)

    def test_when_a_parameter_breaks_a_rule_then_mds_error_with_code_422_and_the_violation(self):
        with self.assertRaises(MdsError) as raised:
            self.mds.history("AAPL", range="1mo", start="2024-01-02", frame=False)
        self.assertEqual(raised.exception.code, 422)
        self.assertEqual(raised.exception.violations[0]["path"], "query.range")

    def test_when_mds_cannot_be_reached_then_mds_error_with_code_0(self):
        with self.assertRaises(MdsError) as raised:
            Client("http://127.0.0.1:1", timeout=5).markets()
        self.assertEqual(raised.exception.code, 0)
        self.assertIn("Cannot reach mds", raised.exception.error)

    def test_credentials_do_not_show_in_the_repr(self):
        self.assertNotIn("secret", repr(Client(MDS_URL, api_key="secret-key", token="secret-token")))


@unittest.skipUnless(MDS_LIMITED_URL, "set MDS_LIMITED_URL to an mds with a tiny RATE_LIMIT_ANONYMOUS_PER_MINUTE")
class RateLimitTest(unittest.TestCase):
    def test_when_the_quota_is_used_up_then_mds_error_with_code_429_and_retry_after(self):
        mds = Client(MDS_LIMITED_URL)
        with self.assertRaises(MdsError) as raised:
            for _ in range(20):
                mds.quote("AAPL")
        self.assertEqual(raised.exception.code, 429)
        self.assertGreater(raised.exception.retry_after, 0)
        self.assertTrue(raised.exception.error)


if __name__ == "__main__":
    unittest.main()
