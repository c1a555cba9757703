"""Rolling credentials with an overlap (KEY_ROLL_OVERLAP_HOURS): a rolled secret key keeps working
until the overlap ends, then answers 401; a rolled webhook secret keeps signing beside the new one
(two `v1,` signatures, each verified alone with the `standardwebhooks` package), then stops."""
import re
import time

import pytest
from standardwebhooks.webhooks import Webhook
from support.helpers import Api, FakeClock, assert_error

from app.domain.representation import iso
from app.webhooks.signing import VerificationError, sign, verify

HOUR = 3600


def invoke(runner, *args):
    result = runner.invoke(args=list(args))
    return result


def shown_once(output, label):
    return output.split(f"{label} (shown once): ")[1].split()[0]


def roll(runner, merchant_id, *options):
    result = invoke(runner, "merchants", "roll-key", merchant_id, *options)
    assert result.exit_code == 0, result.output
    return shown_once(result.output, "New secret key"), result.output


def test_the_old_key_works_until_the_overlap_ends(runner, client, merchant, clock):
    old = Api(client, merchant["secretKey"])
    process_id = old.preorder().get_json()["processId"]
    rolled_at = clock.now
    new_key, output = roll(runner, merchant["merchantId"])
    assert re.fullmatch(r"sk_test_[0-9A-Za-z]{40}", new_key) and new_key != merchant["secretKey"]
    rolled, ends = iso(rolled_at), iso(rolled_at + 24 * HOUR)  # 24 h, the default
    assert f"The previous keys stop working until {ends}: put the new one" in output
    new = Api(client, new_key)
    assert new.get(process_id).status_code == 200

    clock.advance(24 * HOUR - 1)  # the overlap's last second
    assert old.get(process_id).status_code == 200
    keys = invoke(runner, "merchants", "keys", merchant["merchantId"]).output
    assert f"{merchant['secretKey'][:20]}…  {rolled}  works until {ends}" in keys
    assert f"{new_key[:20]}…  {rolled}  active" in keys

    clock.advance(1)
    assert clock.now == rolled_at + 24 * HOUR
    body = assert_error(old.get(process_id), 401, "invalid_secret_key")
    assert body["message"] == "Invalid secret key."
    assert_error(old.preorder(), 401, "invalid_secret_key")
    assert new.get(process_id).status_code == 200
    keys = invoke(runner, "merchants", "keys", merchant["merchantId"]).output
    assert f"{merchant['secretKey'][:20]}…  {rolled}  expired {ends}" in keys


def test_overlap_zero_ends_the_old_key_at_once(runner, client, merchant):
    new_key, output = roll(runner, merchant["merchantId"], "--overlap-hours", "0")
    assert "The previous keys stop working at once" in output
    assert_error(Api(client, merchant["secretKey"]).preorder(), 401, "invalid_secret_key")
    assert Api(client, new_key).preorder().status_code == 200


@pytest.mark.parametrize("app_config", [{"KEY_ROLL_OVERLAP_HOURS": 2}])
def test_the_overlap_comes_from_the_setting(runner, client, merchant, clock, app_config):
    new_key, _ = roll(runner, merchant["merchantId"])
    old = Api(client, merchant["secretKey"])
    clock.advance(2 * HOUR - 1)
    assert old.preorder().status_code == 200
    clock.advance(1)
    assert_error(old.preorder(), 401, "invalid_secret_key")


def test_a_second_roll_ends_every_older_key_and_keeps_an_earlier_end(runner, client, merchant,
                                                                     clock):
    first, _ = roll(runner, merchant["merchantId"], "--overlap-hours", "10")
    clock.advance(HOUR)
    second, _ = roll(runner, merchant["merchantId"], "--overlap-hours", "48")
    original, first_api, second_api = (Api(client, k)
                                       for k in (merchant["secretKey"], first, second))
    clock.advance(9 * HOUR)  # 10 h after the first roll: the original key's end is kept
    assert_error(original.preorder(), 401, "invalid_secret_key")
    assert first_api.preorder().status_code == 200
    clock.advance(39 * HOUR)  # 48 h after the second roll
    assert_error(first_api.preorder(), 401, "invalid_secret_key")
    assert second_api.preorder().status_code == 200


def test_a_revoked_key_stays_revoked_and_rotate_key_still_adds_one(runner, client, merchant):
    added = shown_once(invoke(runner, "merchants", "rotate-key", merchant["merchantId"]).output,
                       "New secret key")
    assert invoke(runner, "merchants", "revoke-key", merchant["merchantId"], added).exit_code == 0
    roll(runner, merchant["merchantId"])
    assert_error(Api(client, added).preorder(), 401, "invalid_secret_key")
    assert Api(client, merchant["secretKey"]).preorder().status_code == 200  # in its overlap


def test_roll_key_refuses_bad_input(runner, merchant):
    unknown = invoke(runner, "merchants", "roll-key", "mer_nope")
    assert unknown.exit_code == 1
    assert f"No merchant mer_nope in {runner.app.config['DATABASE']}." in unknown.output
    negative = invoke(runner, "merchants", "roll-key", merchant["merchantId"], "--overlap-hours",
                      "-1")
    assert negative.exit_code == 2 and "-1 is not in the range 0<=x<=8760" in negative.output
    endless = invoke(runner, "merchants", "roll-key", merchant["merchantId"], "--overlap-hours",
                     "10" + "0" * 20)  # past the database's integers: refused, no traceback
    assert endless.exit_code == 2 and "is not in the range 0<=x<=8760" in endless.output


# --- The webhook secret ---------------------------------------------------------------------------

@pytest.fixture
def clock():
    """Starts at the real time: standardwebhooks refuses timestamps more than 5 minutes off."""
    return FakeClock(int(time.time()))


def rotate_webhook_secret(runner, merchant_id, *options):
    result = invoke(runner, "merchants", "rotate-webhook-secret", merchant_id, *options)
    assert result.exit_code == 0, result.output
    return shown_once(result.output, "New webhook secret"), result.output


def test_during_the_overlap_each_secret_verifies_alone(app, shop, receiver, worker, clock, runner):
    shop.cancelled()
    worker.run_once()
    new_secret, output = rotate_webhook_secret(runner, shop.id)
    assert new_secret != shop.secret and new_secret.startswith("whsec_")
    assert "signature with the old secret too until" in output
    clock.advance(60)
    shop.cancelled()
    worker.run_once()
    before, during = receiver.wait_for(2)
    assert len(before.headers["webhook-signature"].split(" ")) == 1
    Webhook(shop.secret).verify(before.body, before.headers)

    signatures = during.headers["webhook-signature"].split(" ")
    timestamp = int(during.headers["webhook-timestamp"])
    assert timestamp == clock.now
    assert signatures == [sign(secret, during.headers["webhook-id"], timestamp, during.body)
                          for secret in (new_secret, shop.secret)]
    for secret in (new_secret, shop.secret):  # a receiver holding either one
        assert Webhook(secret).verify(during.body, during.headers)["type"] == "process.cancelled"
        verify(secret, during.headers, during.body, now=clock.now)


def test_after_the_overlap_only_the_new_secret_signs(app, shop, receiver, worker, clock, runner):
    new_secret, _ = rotate_webhook_secret(runner, shop.id, "--overlap-hours", "1")
    clock.advance(HOUR - 1)
    shop.cancelled()
    worker.run_once()
    clock.advance(1)
    shop.cancelled()
    worker.run_once()
    last_second, after = receiver.wait_for(2)
    assert len(last_second.headers["webhook-signature"].split(" ")) == 2
    [signature] = after.headers["webhook-signature"].split(" ")
    assert signature == sign(new_secret, after.headers["webhook-id"], clock.now, after.body)
    # An hour past the real time: standardwebhooks would refuse the timestamp before the
    # signature, so the same check is made with the service's verify
    # (tests/webhooks/test_webhook_signing.py holds it to the package's answers).
    verify(new_secret, after.headers, after.body, now=clock.now)
    with pytest.raises(VerificationError, match="no matching v1 signature"):
        verify(shop.secret, after.headers, after.body, now=clock.now)


def test_overlap_zero_swaps_at_once(app, shop, receiver, worker, clock, runner):
    new_secret, output = rotate_webhook_secret(runner, shop.id, "--overlap-hours", "0")
    assert "signed with it alone" in output
    shop.cancelled()
    worker.run_once()
    [got] = receiver.wait_for(1)
    assert len(got.headers["webhook-signature"].split(" ")) == 1
    Webhook(new_secret).verify(got.body, got.headers)
    with pytest.raises(Exception, match="No matching signature found"):
        Webhook(shop.secret).verify(got.body, got.headers)


def test_a_retry_is_signed_again_at_its_own_time_with_both(app, shop, receiver, worker, clock,
                                                           runner):
    from support.receiver import Reply

    receiver.reply(Reply(status=500))
    shop.cancelled()
    worker.run_once()  # signed with the old secret alone, refused
    new_secret, _ = rotate_webhook_secret(runner, shop.id)
    clock.advance(5)
    worker.run_once()
    first, retry = receiver.wait_for(2)
    assert first.headers["webhook-id"] == retry.headers["webhook-id"]
    assert int(retry.headers["webhook-timestamp"]) == int(first.headers["webhook-timestamp"]) + 5
    for secret in (new_secret, shop.secret):
        Webhook(secret).verify(retry.body, retry.headers)
