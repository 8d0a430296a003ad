def roles():
    return {"h21py_roles": ["web", "db"]}
