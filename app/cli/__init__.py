"""Operator commands: `flask --app app <group> <command>`."""


def init_app(app):
    from app.cli.demo import demo_merchant
    from app.cli.merchants import merchants
    from app.cli.processes import processes

    app.cli.add_command(demo_merchant)
    app.cli.add_command(merchants)
    app.cli.add_command(processes)
