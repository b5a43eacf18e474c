"""Never finishes its import."""
while True:
    pass
