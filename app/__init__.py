"""The payment preorder service: `create_app()` builds the Flask application."""
import logging
import os

from flask import Flask

from app import config as settings


def create_app(test_config=None):
    # No /static route: app/static holds the button's sources, served joined at
    # /payment-button/button.js.
    app = Flask(__name__, instance_relative_config=True, static_folder=None)
    app.config.from_mapping(
        settings.DEFAULTS,
        DATABASE=os.path.join(app.instance_path, "preorder.sqlite3"),
    )
    if test_config is None:
        app.config.from_pyfile("config.py", silent=True)
        app.config.from_prefixed_env()
    else:
        app.config.from_mapping(test_config)
    settings.normalize(app.config)
    logging.basicConfig(level=logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")

    from app import cli, console, db, demo
    from app.web import button, checkout, docs, endpoints, errors, links, merchant, ops
    from app.web.http import ProcessIdConverter
    from app.web.schemas import Limits, PreorderSchema

    app.url_map.converters["process_id"] = ProcessIdConverter
    # A doubled slash is no path of the API: 404 not_found in the envelope, not werkzeug's HTML 308
    # (a redirect is a routing exception Flask answers without the error handlers).
    app.url_map.merge_slashes = False
    database = db.init_app(app)
    errors.init_app(app, database)
    cli.init_app(app)
    app.extensions["preorder_schema"] = PreorderSchema(Limits.from_config(app.config))
    app.extensions["openapi_document"] = docs.load_document(app.config)
    app.register_blueprint(merchant.bp)
    app.register_blueprint(links.bp)
    app.register_blueprint(endpoints.bp)
    app.register_blueprint(checkout.bp)  # pages for customers: /checkout/<id>, /l/<linkId>
    app.register_blueprint(button.bp)
    app.register_blueprint(ops.bp)
    app.register_blueprint(docs.bp)
    console.init_app(app)  # the merchant console, /dashboard/
    demo.init_app(app)  # its commands; its pages only with DEMO_SHOP on
    return app
