"""Backend families: one package per family (DESIGN.md section 6); the core names none of them."""
