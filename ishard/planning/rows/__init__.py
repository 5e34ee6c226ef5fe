"""The row reader: an inventory read a row at a time in Python (CSV with a header, JSON Lines,
AWS S3 Inventory reports), kept as the column engine's oracle and for what it hands back."""
