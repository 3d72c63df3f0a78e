"""The SQL statements, one per file, in a folder per stage (read through tokenledger.packaged)."""
