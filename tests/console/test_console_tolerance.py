"""The underpayment tolerance on the console's settings page: an owner sets it (CSRF token
required), a viewer sees it and changes nothing, a value outside 0–5 % is refused with a message."""
import re

PASSWORD = "correct horse battery"


def csrf_of(html):
    return re.search(r'name="csrf_token" value="([^"]+)"', html).group(1)


def user(runner, client, merchant, role):
    email = f"{role}@shop.example"
    created = runner.invoke(args=["users", "create", email, "--merchant", merchant["merchantId"],
                                  "--role", role], input=PASSWORD + "\n")
    assert created.exit_code == 0, created.output
    page = client.get("/dashboard/login")
    client.post("/dashboard/login", data={"email": email, "password": PASSWORD,
                                          "csrf_token": csrf_of(page.text)})
    return client


def tolerance(runner, merchant):
    from app.domain.merchants import tolerance_of
    return tolerance_of(runner.app.extensions["db"], merchant["merchantId"])


def test_an_owner_sets_the_tolerance_with_the_csrf_token(runner, client, merchant):
    console = user(runner, client, merchant, "owner")
    page = console.get("/dashboard/settings")
    assert page.status_code == 200
    assert "Underpayment tolerance" in page.text and "<strong>0 %</strong>" in page.text
    token = csrf_of(page.text)
    saved = console.post("/dashboard/settings/tolerance",
                         data={"tolerance": "0.50", "csrf_token": token})
    assert (saved.status_code, saved.headers["Location"]) == (
        303, "/dashboard/settings?done=tolerance#tolerance")
    saved = console.get(saved.headers["Location"])
    assert "Underpayment tolerance saved" in saved.text and "<strong>0.5 %</strong>" in saved.text
    assert tolerance(runner, merchant) == "0.5"
    refused = console.post("/dashboard/settings/tolerance",
                           data={"tolerance": "6", "csrf_token": token})
    assert refused.status_code == 400 and "from 0 to 5" in refused.text
    forged = console.post("/dashboard/settings/tolerance", data={"tolerance": "5"})
    assert forged.status_code in (400, 403)
    assert tolerance(runner, merchant) == "0.5"


def test_a_viewer_sees_the_tolerance_but_cannot_change_it(runner, client, merchant):
    console = user(runner, client, merchant, "viewer")
    page = console.get("/dashboard/settings")
    assert "<strong>0 %</strong>" in page.text and "Save tolerance" not in page.text
    refused = console.post("/dashboard/settings/tolerance",
                           data={"tolerance": "1", "csrf_token": csrf_of(page.text)})
    assert refused.status_code == 403 and "viewer" in refused.text
    assert tolerance(runner, merchant) == "0"
