"""The keys page: the secret keys and their states, the public key, the webhook signing secret's
state; rolling either secret (shown once, on the page answering the POST) and revoking a key now,
each after a confirmation page (docs/console.md "Keys").

  GET  /dashboard/keys; GET, POST /dashboard/keys/roll, /keys/roll-webhook-secret,
  /keys/<keyId>/revoke
"""
from flask import current_app, g, render_template, url_for

from app.clock import now
from app.console import pages
from app.console.pages import bp, when
from app.console.security import login_required, not_found, owner_required
from app.db import get_db
from app.domain import endpoints, merchants


@bp.get("/keys")
@login_required
def keys_page(new_secret=None, error=None, status=200):
    current = now()
    secret_keys = merchants.keys_of(get_db(), g.merchant.id)
    states = {}
    for k in secret_keys:
        state = k.state(current)
        states[k.id] = {"expiring": f"works until {when(k.expires_at)}",
                        "expired": f"expired {when(k.expires_at)}",
                        "revoked": f"revoked {when(k.revoked_at)}"}.get(state, state)
    first = endpoints.first(get_db(), g.merchant.id)
    if first is not None and len(first.signing_secrets(current)) > 1:
        secret_state = ("Deliveries to the first webhook endpoint are signed with its current"
                        f" secret and, until {when(first.previous_secret_until)}, with the previous"
                        " one too.")
    else:
        secret_state = ("One secret signs every delivery to the first webhook endpoint. It is shown"
                        " once, when it is made; each other endpoint has its own (Webhooks page).")
    working = [k for k in secret_keys if k.state(current) in ("active", "expiring")]
    revocable = {k.id for k in working} if len(working) > 1 else set()
    return render_template("dashboard/keys.html", secret_keys=secret_keys, key_states=states,
                           webhook_secret_state=secret_state, new_secret=new_secret,
                           overlap_hours=current_app.config["KEY_ROLL_OVERLAP_HOURS"],
                           revocable=revocable, notice=pages.notice(), error=error), status


def _until(overlap):
    return "stop working now" if not overlap else f"keep working until {when(now() + overlap)}"


@bp.get("/keys/roll")
@login_required
@owner_required
def confirm_roll_secret_key():
    overlap = merchants.roll_overlap_seconds(current_app.config)
    return pages.confirm("Roll the secret key?",
                    f"A new secret key is made and shown once. The current keys {_until(overlap)}:"
                    " put the new one on your server before then.",
                    url_for("dashboard.roll_secret_key"), "Roll secret key",
                    url_for("dashboard.keys_page"), danger=False)


@bp.get("/keys/roll-webhook-secret")
@login_required
@owner_required
def confirm_roll_webhook_secret():
    hours = current_app.config["KEY_ROLL_OVERLAP_HOURS"]
    return pages.confirm("Roll the webhook signing secret?",
                    "A new secret is made and shown once. Deliveries are signed with the previous"
                    " one" + (f" too for {hours} hour(s)" if hours else " no longer")
                    + ": update your receiver.",
                    url_for("dashboard.roll_webhook_secret"), "Roll webhook secret",
                    url_for("dashboard.keys_page"), danger=False)


def _key_or_404(key_id):
    key = next((k for k in merchants.keys_of(get_db(), g.merchant.id) if k.id == key_id), None)
    if key is None:
        raise not_found()
    return key


@bp.get("/keys/<int:key_id>/revoke")
@login_required
@owner_required
def confirm_revoke_key(key_id):
    key = _key_or_404(key_id)
    return pages.confirm(f"Revoke key {key.key_prefix}… now?",
                    "It stops working at once: every request your servers still send with it"
                    " answers 401. Do this when the key leaked; a server that still uses it"
                    " breaks.",
                    url_for("dashboard.revoke_key", key_id=key.id), "Revoke now",
                    url_for("dashboard.keys_page"))


@bp.post("/keys/<int:key_id>/revoke")
@login_required
@owner_required
def revoke_key(key_id):
    key = _key_or_404(key_id)
    try:
        merchants.revoke_key_now(get_db(), g.merchant.id, key.id, now())
    except merchants.MerchantError as e:
        return keys_page(error=str(e), status=409)
    return pages.done("dashboard.keys_page", "revoked")


@bp.post("/keys/roll")
@login_required
@owner_required
def roll_secret_key():
    overlap = merchants.roll_overlap_seconds(current_app.config)
    secret = merchants.roll_key(get_db(), g.merchant.id, now(), overlap)
    return keys_page(new_secret={
        "title": "New secret key", "value": secret,
        "note": "Copy it to your server now: it is shown this once. The previous keys"
                f" {_until(overlap)}."})


@bp.post("/keys/roll-webhook-secret")
@login_required
@owner_required
def roll_webhook_secret():
    overlap = merchants.roll_overlap_seconds(current_app.config)
    secret = merchants.rotate_webhook_secret(get_db(), g.merchant.id, now(), overlap)
    g.merchant = merchants.get(get_db(), g.merchant.id)
    until = f"until {when(now() + overlap)}" if overlap else "no longer"
    return keys_page(new_secret={
        "title": "New webhook signing secret", "value": secret,
        "note": "Put it in your webhook receiver now: it is shown this once. Deliveries carry a"
                f" signature with the previous secret too {until}."})
