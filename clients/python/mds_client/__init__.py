"""Python client of mds, the Market Data Service.

>>> from mds_client import Client
>>> mds = Client("http://127.0.0.1:8000")
>>> mds.history("AAPL", interval="1d", range="1y")   # a pandas DataFrame when pandas is installed
"""

from .client import Client, MdsError, QuoteList

__all__ = ["Client", "MdsError", "QuoteList"]
__version__ = "0.1.0"
