"""Operator commands: `flask --app app <group> <command>`."""


def init_app(app):
    from app.cli.chain import assets, networks
    from app.cli.collect import (  # also merchants set-payout, networks *-factory
        collect,
        collections,
    )
    from app.cli.endpoints import endpoints
    from app.cli.events import events
    from app.cli.links import links
    from app.cli.merchants import merchants
    from app.cli.ops import backup_db, prune
    from app.cli.processes import processes
    from app.cli.rates import rates
    from app.cli.reconcile import reconcile
    from app.cli.storage import copy_db_command, init_db_command
    from app.cli.users import users
    from app.cli.watcher import watch_payments
    from app.cli.worker import deliver_webhooks

    app.cli.add_command(merchants)
    app.cli.add_command(processes)
    app.cli.add_command(events)
    app.cli.add_command(endpoints)
    app.cli.add_command(deliver_webhooks)
    app.cli.add_command(init_db_command)
    app.cli.add_command(copy_db_command)
    app.cli.add_command(watch_payments)
    app.cli.add_command(prune)
    app.cli.add_command(backup_db)
    app.cli.add_command(networks)
    app.cli.add_command(assets)
    app.cli.add_command(rates)
    app.cli.add_command(links)
    app.cli.add_command(collect)
    app.cli.add_command(collections)
    app.cli.add_command(users)
    app.cli.add_command(reconcile)
