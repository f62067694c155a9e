"""Who may ask the broker what: authentication and the right each method needs (``access``), the principals
learned from the name server, and the budget of connections not authenticated yet."""
