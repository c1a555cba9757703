"""What the tests share besides fixtures (those are in tests/conftest.py, and an area's own in its
conftest.py, e.g. tests/chain/conftest.py): servers, nodes, the browser, the receiver, database
helpers. Imported as `support.<module>` (setup.cfg puts tests/ on sys.path); a test file never
imports from another test file."""
