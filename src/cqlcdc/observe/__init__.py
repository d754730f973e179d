"""What cqlcdc tells an operator: Prometheus metrics and one-line event logs.

This package imports nothing of cqlcdc, so every layer (the server, the engine, the store)
may call it. ``instruments`` holds the registry and the metrics updated as work happens;
``events`` the one-line calls the engine makes (each counts and logs); ``logs`` the text
and JSON log formats. The collectors that read a running server's state at scrape time
live with the server (``cqlcdc.server.metrics``).

>>> from cqlcdc.observe import events
>>> events.group_committed(12)
"""

from cqlcdc.observe import events, instruments, logs

__all__ = ["events", "instruments", "logs"]
