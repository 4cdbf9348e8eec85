"""holsrv: keeps HOL4 language servers warm and answers questions about HOL4 scripts."""

__version__ = "0.1.0"
