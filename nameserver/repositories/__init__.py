"""Data access: one repository per table family, each wrapping a ``Session``; no business rules."""
