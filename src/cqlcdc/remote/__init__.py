"""The command line's client of a running ``cqlcdc serve`` (``--connect HOST:PORT``): the
cassandra-driver adapted to return cqlcdc's own rows and errors (``protocol``) behind the
surface of the embedded session (``session``)."""
