"""What the tests share besides fixtures (those are in tests/conftest.py): servers, nodes, the browser,
the receiver, database helpers. Imported as `support.<module>` (setup.cfg puts tests/ on sys.path)."""
