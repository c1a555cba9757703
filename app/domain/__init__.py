"""What the service does, whoever asks (the API, the console, the CLI, the workers):
processes, refunds, merchants, the operator's setup of networks and assets (setup.py), payments
(payments.py: the Button API's side) and payouts, the outbox of webhook events, and the records
and representations they share. Below it: app/db/, app/data/ (SQL), app/evm/."""
