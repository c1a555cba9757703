"""What the service does, whoever asks (the API, the console, the CLI, the workers):
processes, refunds, merchants, payments and payouts, the outbox of webhook events,
and the records and representations they share. Below it: app/data/ (SQL), app/db/."""
