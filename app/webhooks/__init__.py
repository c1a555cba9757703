"""Webhook transport: signing, SSRF guard, one HTTP attempt, retry schedule.

Pure modules, no Flask app or database: the delivery worker calls them.
"""
