"""The system keyspaces a client reads (``system``, ``system_schema``,
``system_virtual_schema``, ``system_distributed``, ``system_cqlcdc``): virtual, read-only
tables computed from the catalog, the CDC generations and the node's address (``tables``
dispatches to the others). They describe the node and its schema, not CDC, so they sit
above the core's ``cdc`` package (they read its CDC generations and table extensions)
rather than inside it.
"""
