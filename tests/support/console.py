"""Logging in to the merchant console from a test, as a person would: a user made through the CLI,
the login form with its CSRF token, the session's cookie kept by the client."""
import re

PASSWORD = "correct horse battery"


def csrf_of(text):
    """The CSRF token of a console page's form."""
    return re.search(r'name="csrf_token" value="([^"]+)"', text).group(1)


def log_in(runner, client, merchant, email=None, role="owner"):
    """`client` logged in as a new user of `merchant` (`email`: <role>@shop.example by default)."""
    email = email or f"{role}@shop.example"
    created = runner.invoke(args=["users", "create", email, "--merchant", merchant["merchantId"],
                                  "--role", role], input=PASSWORD + "\n")
    assert created.exit_code == 0, created.output
    return log_in_as(client, email)


def log_in_as(client, email):
    """`client` logged in as an existing user."""
    page = client.get("/dashboard/login")
    response = client.post("/dashboard/login", data={"email": email, "password": PASSWORD,
                                                      "csrf_token": csrf_of(page.text)})
    assert response.status_code == 303, response.text
    return client
