"""The data contracts (ODCS v3), in a folder per input, config file and published schema (read through
tokenledger.packaged)."""
