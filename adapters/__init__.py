"""Vector-store backends behind one interface (`adapters.base.VectorBackend`).

One module per backend; none imports aiohttp, and no SDK type or exception
leaves an adapter.
"""
