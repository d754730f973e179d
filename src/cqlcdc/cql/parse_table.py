"""Grammar rules for table DDL: CREATE / ALTER / DROP TABLE, TRUNCATE, table options and
YDB-style ``ADD CHANGEFEED``."""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from cqlcdc.cql.ast import (
    AddChangefeed,
    AddColumns,
    AlterColumnType,
    AlterTable,
    AlterTableAction,
    ColumnDef,
    CreateTable,
    DisableChangefeed,
    DropChangefeed,
    DropColumns,
    DropTable,
    OptionValue,
    RenameColumns,
    SetOptions,
    SetTtlColumn,
    Truncate,
)
from cqlcdc.cql.parse_terms import TermsMixin
from cqlcdc.cql.tokens import Token, TokenType
from cqlcdc.errors import CqlSyntaxError, InvalidRequest


class TableMixin(TermsMixin):
    """``create_table``, ``column_definition``, ``primary_key``, ``table_options``,
    ``alter_table`` (one ``_parse_alter_<action>`` per action), ``drop_table``, ``truncate``."""

    ALTER_TABLE_PARSERS: ClassVar[dict[str, Callable[[TableMixin], AlterTableAction]]] = {
        "add": lambda self: self._parse_alter_add(),
        "drop": lambda self: self._parse_alter_drop(),
        "rename": lambda self: self._parse_alter_rename(),
        "alter": lambda self: self._parse_alter_type(),
        "with": lambda self: self._parse_alter_with(),
        "ttl": lambda self: self._parse_alter_ttl(),
    }

    # -- CREATE TABLE ------------------------------------------------------------------------

    def _parse_create_table(self) -> CreateTable:
        """``CREATE TABLE [IF NOT EXISTS] t (col type [STATIC] [PRIMARY KEY], ...,
        [PRIMARY KEY ((pk, ...), ck, ...)]) [WITH option AND ...]`` (CREATE and TABLE
        already consumed)."""
        if_not_exists = self._parse_if_not_exists()
        name = self._parse_qualified_name()
        self._expect(TokenType.LPAREN)
        columns: list[ColumnDef] = []
        primary_key: tuple[tuple[str, ...], tuple[str, ...]] | None = None
        while True:
            token = self._curr
            if self._is_word("primary") and self._is_word("key", offset=1):
                self._advance()
                self._advance()
                if primary_key is not None:
                    raise self._multiple_primary_keys(token)
                primary_key = self._parse_primary_key()
            else:
                column, inline_key = self._parse_column_definition()
                columns.append(column)
                if inline_key:
                    if primary_key is not None:
                        raise self._multiple_primary_keys(token)
                    primary_key = ((column.name,), ())
            if not self._match(TokenType.COMMA):
                break
            # Cql.g cfamDefinition: '(' cfamColumns ( ',' cfamColumns? )* ')': an entry after
            # a comma may be empty (``a int, , b int``, a trailing comma), the first may not
            while self._match(TokenType.COMMA):
                pass
            if self._at(TokenType.RPAREN):
                break
        closing = self._expect(TokenType.RPAREN)
        if primary_key is None:
            raise self._error("No PRIMARY KEY specifed (exactly one required)", closing)
        clustering_order: tuple[tuple[str, str], ...] = ()
        options: list[tuple[str, OptionValue]] = []
        compact_storage = False
        if self._match_word("with"):
            while True:
                if self._match_words("compact", "storage"):
                    compact_storage = True
                elif self._match_words("clustering", "order", "by"):
                    # a second clause adds to the first, as in ScyllaDB (``cf_properties::
                    # set_ordering``), so a contradicting one fails validation, never wins
                    clustering_order += self._parse_clustering_order()
                else:
                    self._parse_option(options)
                if not self._match_word("and"):
                    break
        return CreateTable(
            name,
            tuple(columns),
            primary_key[0],
            primary_key[1],
            clustering_order,
            tuple(options),
            compact_storage,
            if_not_exists,
        )

    def _multiple_primary_keys(self, token: Token) -> CqlSyntaxError:
        return self._error("Multiple PRIMARY KEYs specified (exactly one required)", token)

    def _parse_column_definition(self, allow_ttl: bool = True) -> tuple[ColumnDef, bool]:
        """``name type [TTL] [STATIC] [PRIMARY KEY]`` -> (the column, whether it is the key);
        ``TTL`` only in CREATE TABLE, as in ScyllaDB's grammar."""
        name = self._parse_identifier()
        column_type = self._parse_type()
        ttl = allow_ttl and self._match_word("ttl")
        static = self._match_word("static")
        inline_key = self._match_words("primary", "key")
        return ColumnDef(name, column_type, static, ttl), inline_key

    def _parse_primary_key(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """``((pk1, pk2), ck1, ck2)`` or ``(pk, ck1, ...)`` (PRIMARY KEY already consumed)."""
        self._expect(TokenType.LPAREN)
        if self._at(TokenType.LPAREN):
            partition_key = self._parse_identifier_list()
        else:
            partition_key = (self._parse_identifier(),)
        clustering: list[str] = []
        while self._match(TokenType.COMMA):
            clustering.append(self._parse_identifier())
        self._expect(TokenType.RPAREN)
        return partition_key, tuple(clustering)

    def _parse_clustering_order(self) -> tuple[tuple[str, str], ...]:
        """``(c1 DESC, c2 ASC, ...)`` (CLUSTERING ORDER BY already consumed)."""
        self._expect(TokenType.LPAREN)
        order: list[tuple[str, str]] = []
        while True:
            column = self._parse_identifier()
            direction = "DESC" if self._match_word("desc") else "ASC"
            if direction == "ASC":
                self._match_word("asc")
            order.append((column, direction))
            if not self._match(TokenType.COMMA):
                break
        self._expect(TokenType.RPAREN)
        return tuple(order)

    def _parse_option(self, options: list[tuple[str, OptionValue]]) -> None:
        """``name = value`` appended to ``options`` (a repeated name is a syntax error)."""
        token = self._curr
        name = self._parse_identifier()
        if any(existing == name for existing, _ in options):
            raise self._error(f"Multiple definition for property {name}", token)
        self._expect(TokenType.EQ)
        options.append((name, self._parse_term()))

    def _parse_options(self) -> tuple[tuple[str, OptionValue], ...]:
        options: list[tuple[str, OptionValue]] = []
        self._parse_option(options)
        while self._match_word("and"):
            self._parse_option(options)
        return tuple(options)

    # -- ALTER TABLE -------------------------------------------------------------------------

    def _parse_alter_table(self) -> AlterTable:
        """``ALTER TABLE t <action>`` (ALTER and TABLE already consumed)."""
        name = self._parse_qualified_name()
        token = self._curr
        parser = self.ALTER_TABLE_PARSERS.get(token.value)
        if token.type is not TokenType.WORD or parser is None:
            raise self._no_viable(token)
        return AlterTable(name, parser(self))

    def _parse_alter_add(self) -> AddColumns | AddChangefeed:
        self._expect_word("add")
        # ADD CHANGEFEED name WITH (...) vs a column named "changefeed": ADD changefeed int
        if self._is_word("changefeed") and self._is_word("with", offset=2):
            self._advance()
            return self._parse_add_changefeed()
        if self._match(TokenType.LPAREN):
            columns = [self._parse_column_definition(allow_ttl=False)[0]]
            while self._match(TokenType.COMMA):
                columns.append(self._parse_column_definition(allow_ttl=False)[0])
            self._expect(TokenType.RPAREN)
            return AddColumns(tuple(columns))
        return AddColumns((self._parse_column_definition(allow_ttl=False)[0],))

    def _parse_add_changefeed(self) -> AddChangefeed:
        """``name WITH (MODE = 'UPDATES', FORMAT = 'JSON', ...)``: option names upper-cased."""
        name = self._parse_identifier()
        self._expect_word("with")
        self._expect(TokenType.LPAREN)
        options: list[tuple[str, OptionValue]] = []
        while True:
            token = self._curr
            option = self._parse_identifier().upper()
            if any(existing == option for existing, _ in options):
                raise self._error(f"Multiple definition for property {option}", token)
            self._expect(TokenType.EQ)
            options.append((option, self._parse_term()))
            if not self._match(TokenType.COMMA):
                break
        self._expect(TokenType.RPAREN)
        return AddChangefeed(name, tuple(options))

    def _parse_alter_drop(self) -> DropColumns | DropChangefeed:
        self._expect_word("drop")
        # DROP CHANGEFEED name vs a column named "changefeed": DROP changefeed
        if self._is_word("changefeed") and self._is_identifier(1):
            self._advance()
            return DropChangefeed(self._parse_identifier())
        if self._at(TokenType.LPAREN):
            columns = self._parse_identifier_list()
        else:
            columns = (self._parse_identifier(),)
        # [USING TIMESTAMP n]: cells at or below n belong to the dropped column (ScyllaDB's
        # grammar takes an integer literal here, not a bind marker)
        if self._match_word("using"):
            self._expect_word("timestamp")
            return DropColumns(columns, int(self._expect(TokenType.INTEGER).value))
        return DropColumns(columns)

    def _parse_alter_rename(self) -> RenameColumns:
        self._expect_word("rename")
        return RenameColumns(self._parse_renames())

    def _parse_renames(self) -> tuple[tuple[str, str], ...]:
        """``a TO b [AND c TO d ...]``."""
        renames: list[tuple[str, str]] = []
        while True:
            old = self._parse_identifier()
            self._expect_word("to")
            renames.append((old, self._parse_identifier()))
            if not self._match_word("and"):
                return tuple(renames)

    def _parse_alter_type(self) -> AlterColumnType | DisableChangefeed:
        self._expect_word("alter")
        # ALTER CHANGEFEED name DISABLE | SET (...) vs a column named "changefeed":
        # ALTER changefeed TYPE int
        if (
            self._is_word("changefeed")
            and self._is_identifier(1)
            and not self._is_word("type", offset=1)
        ):
            self._advance()
            return self._parse_alter_changefeed()
        column = self._parse_identifier()
        self._expect_word("type")
        return AlterColumnType(column, self._parse_type())

    def _parse_alter_ttl(self) -> SetTtlColumn:
        """``TTL column`` or ``TTL NULL`` (ScyllaDB's per-row TTL)."""
        self._expect_word("ttl")
        if self._match_word("null"):
            return SetTtlColumn(None)
        return SetTtlColumn(self._parse_identifier())

    def _parse_alter_changefeed(self) -> DisableChangefeed:
        """``name DISABLE`` or ``name SET (option = value, ...)`` (YQL's
        ``changefeed_alter_settings``); YDB supports no change of a setting, and neither do we:
        its message names the first one."""
        name = self._parse_identifier()
        if self._match_word("disable"):
            return DisableChangefeed(name)
        self._expect_word("disable", "set")
        self._expect(TokenType.LPAREN)
        option = self._parse_identifier().upper()
        raise InvalidRequest(f"{option} alter is not supported")

    def _parse_alter_with(self) -> SetOptions:
        self._expect_word("with")
        return SetOptions(self._parse_options())

    # -- DROP TABLE / TRUNCATE ---------------------------------------------------------------

    def _parse_drop_table(self) -> DropTable:
        """``DROP TABLE [IF EXISTS] t`` (DROP and TABLE already consumed)."""
        if_exists = self._parse_if_exists()
        return DropTable(self._parse_qualified_name(), if_exists)

    def _parse_truncate(self) -> Truncate:
        """``TRUNCATE [TABLE | COLUMNFAMILY] t``."""
        self._expect_word("truncate")
        if self._is_word("table", "columnfamily"):
            self._advance()
        return Truncate(self._parse_qualified_name())
