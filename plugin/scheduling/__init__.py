"""Sharing the machine among tenants: who a request works for, fair queues, admission."""
