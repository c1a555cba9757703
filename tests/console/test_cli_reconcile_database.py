"""`reconcile` of a network the database does not have names the database it looked in, as every
operator command's lookup does (app/cli/common.py fail): a second database, the live demo's, is then
told from the first at once."""


def test_reconcile_of_an_unknown_network_names_the_database(runner, app):
    from app.db import location

    result = runner.invoke(args=["reconcile", "local"])
    assert result.exit_code == 1
    assert result.output == f"Error: No network local in {location(app.config['DATABASE'])}.\n"
