"""Indicators through the client, checked against pandas (indicator_reference.py).

mds computes each study over its stored history, reading the warm-up bars before the window itself;
here pandas computes the same studies over a history that starts years earlier, and the window's
rows must agree to 1e-9 from its first row on. Runs against the mds named by MDS_URL (the vitest
suite test/e2e/python-client.test.ts starts one).
"""

import os
import unittest

from mds_client import Client, MdsError

try:
    import numpy
    import pandas

    from .indicator_reference import compute
except ImportError:
    pandas = None

MDS_URL = os.environ.get("MDS_URL")
WINDOW = {"interval": "1d", "start": "2023-01-01", "end": "2024-01-01"}
FIRST = ["sma:20", "ema:12", "wma:10", "rsi:14", "macd:12:26:9", "bbands:20:2.5", "stoch:14:3:3", "atr:14", "adx:14", "obv"]
SECOND = ["roc:10", "willr:14", "cci:20", "ema:200", "rsi:2"]


def _columns(key, result):
    base = key.replace(":", "_")
    if isinstance(result, dict):
        return {f"{base}_{name}": series for name, series in result.items()}
    return {base: result}


@unittest.skipUnless(MDS_URL, "set MDS_URL to a running mds")
@unittest.skipUnless(pandas, "pandas is not installed")
class IndicatorsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.mds = Client(MDS_URL)
        # Thirteen years before the window: longer than any warm-up these studies need (EMA(200)'s is
        # 2,949 bars, the bars until its seed weighs less than 1e-12).
        cls.full = cls.mds.history("AAPL", interval="1d", start="2010-01-01", end="2024-01-01")

    def _reference(self, keys, index):
        frame = self.full.reset_index(drop=True)
        frame["session"] = None
        out = {}
        for key in keys:
            for column, series in _columns(key, compute(frame, key)).items():
                series.index = self.full.index
                out[column] = series.loc[index]
        return out

    def test_when_history_is_asked_with_studies_then_one_dataframe_column_per_output_equal_to_pandas_from_the_first_row(self):
        for studies in (FIRST, SECOND):
            df = self.mds.history("AAPL", studies=studies, **WINDOW)
            self.assertGreater(len(df), 200)
            reference = self._reference(studies, df.index)
            study_columns = [c for c in df.columns if c not in ("open", "high", "low", "close", "adj_close", "volume")]
            self.assertEqual(len(study_columns), len(reference), study_columns)
            for column in study_columns:
                ours = df[column].to_numpy(dtype=float)
                if column == "obv":
                    # OBV starts at the window's first bar: its steps are the whole history's.
                    self.assertEqual(ours[0], df["volume"].iloc[0])
                    numpy.testing.assert_allclose(numpy.diff(ours), numpy.diff(reference[column].to_numpy()), rtol=1e-9)
                    continue
                theirs = reference.get(column)
                self.assertIsNotNone(theirs, f"{column} has a pandas reference")
                self.assertFalse(numpy.isnan(ours[0]), f"{column}: the window's first row has a value")
                numpy.testing.assert_allclose(ours, theirs.to_numpy(dtype=float), rtol=1e-9, atol=1e-9, err_msg=column)

    def test_when_indicators_are_asked_then_the_normalised_studies_aligned_to_the_times(self):
        answer = self.mds.indicators("aapl", ["RSI", "macd:12:26:9", "sma"], **WINDOW)
        self.assertEqual(sorted(answer["studies"]), ["macd:12:26:9", "rsi:14", "sma:20"])
        self.assertEqual(len(answer["studies"]["rsi:14"]), len(answer["times"]))
        self.assertEqual(set(answer["studies"]["macd:12:26:9"]), {"macd", "signal", "histogram"})
        df = self.mds.history("AAPL", studies="rsi", **WINDOW)
        numpy.testing.assert_allclose(df["rsi_14"].to_numpy(), answer["studies"]["rsi:14"], rtol=0)

    def test_when_a_study_is_bad_then_mds_error_422_naming_it(self):
        with self.assertRaises(MdsError) as raised:
            self.mds.indicators("AAPL", "rsi:0,nosuch", range="1mo")
        self.assertEqual(raised.exception.code, 422)
        messages = " ".join(v["message"] for v in raised.exception.violations)
        self.assertIn('"rsi:0"', messages)
        self.assertIn('"nosuch"', messages)


if __name__ == "__main__":
    unittest.main()
