# Lead: merge these plugins into your tests/conftest.py.
pytest_plugins = ["tests.browser", "tests.button_api_double"]
