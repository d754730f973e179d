"""Keyspaces, user types (stable field indices), tables, CDC options, the log-table schema,
the catalog that runs DDL, and DESCRIBE.

>>> from cqlcdc.schema import LOG_SUFFIX
>>> "t" + LOG_SUFFIX
't_scylla_cdc_log'
"""

from cqlcdc.schema.catalog import Catalog
from cqlcdc.schema.cdc_options import cdc_options_from_map, parse_cdc_options
from cqlcdc.schema.describe import create_table_statement, describe_statement, maybe_quote
from cqlcdc.schema.log_table import (
    deleted_column,
    deleted_elements_column,
    is_log_name,
    log_name,
    log_table_schema,
)
from cqlcdc.schema.model import LOG_SUFFIX, CdcOptions, Column, ColumnKind, Keyspace, TableSchema

__all__ = [
    "LOG_SUFFIX",
    "Catalog",
    "CdcOptions",
    "Column",
    "ColumnKind",
    "Keyspace",
    "TableSchema",
    "cdc_options_from_map",
    "create_table_statement",
    "deleted_column",
    "deleted_elements_column",
    "describe_statement",
    "is_log_name",
    "log_name",
    "log_table_schema",
    "maybe_quote",
    "parse_cdc_options",
]
