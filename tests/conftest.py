# Lead: merge this line into your tests/conftest.py.
pytest_plugins = ["tests.browser"]
