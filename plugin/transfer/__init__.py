"""Bulk data: the export format, export and import, the parity check."""
