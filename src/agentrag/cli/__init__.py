"""Command-line interface (typer). Printing is allowed here only."""
