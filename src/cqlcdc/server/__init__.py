"""The CQL native protocol server (``cqlcdc serve``): cqlsh and the drivers connect here."""

from cqlcdc.server.service import CqlServer

__all__ = ["CqlServer"]
