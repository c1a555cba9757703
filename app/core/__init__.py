"""The vocabulary every layer shares: the records read from the database, money in exact units,
exact JSON, key formats, the well-known chains. It imports nothing else of the app."""
